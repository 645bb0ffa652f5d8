#include "headway/serving/json_text.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace headway::serving {

size_t json_container_end(std::string_view text, size_t start) {
  const size_t close =
      sdk::scan_json_brackets(text, start, [](int depth, size_t) { return depth == 0; });
  return close == std::string_view::npos ? close : close + 1;
}

namespace {

using Json = nlohmann::ordered_json;
// ordered_map is a vector of its members: filled directly, without its look-up per key.
using MapMembers = std::vector<std::pair<const std::string, Json>>;

// Builds the value from nlohmann's SAX events. Each open object or array collects its members in
// a vector of its own (moved, never copied, when it grows: a pair with a const key would be
// copied, children and all) with a hash index of an object's keys, a repeated key going to its
// first place; a container closed is moved whole into its parent.
class OrderedBuilder final : public nlohmann::json_sax<Json> {
 public:
  explicit OrderedBuilder(Json& root) : root_(root) {
    // Never reallocated (the nesting is checked first): an Open is not cheap to move.
    open_.reserve(static_cast<size_t>(kMaxJsonDepth) + 1);
  }

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
    open_.emplace_back();
    open_.back().is_object = true;
    return true;
  }
  bool key(string_t& key) override {
    Open& open = open_.back();
    const auto [at, added] = open.index.try_emplace(key, open.members.size());
    if (added) open.members.emplace_back(std::move(key), Json());
    open.current = at->second;
    return true;
  }
  bool end_object() override {
    Json object = Json::object();
    auto& members = static_cast<MapMembers&>(object.get_ref<Json::object_t&>());
    Open& open = open_.back();
    members.reserve(open.members.size());
    for (auto& [key, value] : open.members) members.emplace_back(std::move(key), std::move(value));
    open_.pop_back();
    return add(std::move(object));
  }
  bool start_array(std::size_t /*elements*/) override {
    open_.emplace_back();
    return true;
  }
  bool end_array() override {
    Json array(std::move(open_.back().items));
    open_.pop_back();
    return add(std::move(array));
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  struct Open {
    bool is_object = false;
    std::vector<std::pair<std::string, Json>> members;  // an object's, in first-written order
    std::unordered_map<std::string, size_t> index;      // key -> its place in members
    size_t current = 0;                                 // the member the next value is for
    std::vector<Json> items;                            // an array's
  };

  // A finished value: the root, or the open container's next item or keyed member.
  bool add(Json value) {
    if (open_.empty()) {
      root_ = std::move(value);
    } else if (Open& open = open_.back(); open.is_object) {
      open.members[open.current].second = std::move(value);
    } else {
      open.items.push_back(std::move(value));
    }
    return true;
  }

  Json& root_;
  std::vector<Open> open_;
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
