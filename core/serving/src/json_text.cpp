#include "headway/serving/json_text.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace headway::serving {

bool json_nests_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, a quote included
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

namespace {

using Json = nlohmann::ordered_json;
// ordered_map is a vector of its members: appended to directly, without its look-up per key.
using Members = std::vector<std::pair<const std::string, Json>>;

// Builds the value from nlohmann's SAX events, as its DOM parser does, with each open object's
// keys indexed by a hash map (a repeated key goes to its first place).
class OrderedBuilder final : public nlohmann::json_sax<Json> {
 public:
  explicit OrderedBuilder(Json& root) : root_(root) {}

  bool null() override { return add(Json(nullptr)); }
  bool boolean(bool value) override { return add(Json(value)); }
  bool number_integer(number_integer_t value) override { return add(Json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return add(Json(value)); }
  bool number_float(number_float_t value, const string_t& /*text*/) override {
    return add(Json(value));
  }
  bool string(string_t& value) override { return add(Json(std::move(value))); }
  bool binary(binary_t& /*value*/) override { return false; }  // JSON text has none
  bool start_object(std::size_t /*elements*/) override {
    Json* object = place(Json::object());
    open_.push_back({object, {}});
    return true;
  }
  bool key(string_t& key) override {
    Open& open = open_.back();
    auto& members = static_cast<Members&>(open.value->get_ref<Json::object_t&>());
    const auto [at, added] = open.index.try_emplace(key, members.size());
    if (added) members.emplace_back(std::move(key), Json());
    next_ = &members[at->second].second;
    return true;
  }
  bool end_object() override {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    Json* array = place(Json::array());
    open_.push_back({array, {}});
    return true;
  }
  bool end_array() override {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  struct Open {
    Json* value;
    std::unordered_map<std::string, size_t> index;  // objects: key -> its place
  };

  // Where the next value goes: the root, the array open last, or the member just keyed.
  Json* place(Json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& open = *open_.back().value;
    if (open.is_array()) {
      open.push_back(std::move(value));
      return &open.back();
    }
    *next_ = std::move(value);
    return next_;
  }
  bool add(Json value) {
    place(std::move(value));
    return true;
  }

  Json& root_;
  std::vector<Open> open_;
  Json* next_ = nullptr;
};

}  // namespace

nlohmann::ordered_json parse_json_keeping_order(std::string_view text) {
  if (json_nests_deeper_than(text, kMaxJsonDepth)) return Json(Json::value_t::discarded);
  Json root;
  OrderedBuilder builder(root);
  if (!Json::sax_parse(text, &builder)) return Json(Json::value_t::discarded);
  return root;
}

}  // namespace headway::serving
