#include "jinja_builtins.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <set>
#include <stdexcept>

namespace headway::serving::jinja {
namespace {

using std::runtime_error;

const std::set<std::string, std::less<>> kFilters = {
    "trim",       "length",     "count",  "upper",   "lower",  "capitalize", "default",
    "d",          "join",       "tojson", "items",   "first",  "last",       "list",
    "string",     "int",        "float",  "replace", "safe",   "select",     "reject",
    "selectattr", "rejectattr", "map",    "abs",     "unique", "wordcount"};
const std::set<std::string, std::less<>> kTests = {
    "defined", "undefined",   "none",     "string",   "number", "integer", "float",
    "boolean", "mapping",     "iterable", "sequence", "true",   "false",   "odd",
    "even",    "divisibleby", "equalto",  "eq",       "ne",     "in"};
const std::set<std::string, std::less<>> kFunctions = {"raise_exception", "namespace", "range",
                                                       "strftime_now"};
const std::set<std::string, std::less<>> kMethods = {
    "strip",   "lstrip",     "rstrip", "upper", "lower", "startswith", "endswith", "split",
    "replace", "capitalize", "title",  "items", "keys",  "values",     "get"};

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

void expect_count(const std::string& what, const Arguments& args, size_t min, size_t max) {
  if (args.size() < min || args.size() > max) {
    throw runtime_error(
        what + " takes " +
        (min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max)) +
        " argument(s), got " + std::to_string(args.size()));
  }
}

const std::string& expect_string(const std::string& what, const Value& v) {
  if (!v.is_string()) {
    throw runtime_error(what + " needs a string, got " + std::string(v.type_name()));
  }
  return v.as_string();
}

Value keyword(const KeywordArguments& kwargs, std::string_view name) {
  for (const auto& [key, value] : kwargs) {
    if (key == name) return value;
  }
  return {};
}

void no_keywords(const std::string& what, const KeywordArguments& kwargs,
                 std::initializer_list<std::string_view> allowed = {}) {
  for (const auto& [key, value] : kwargs) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw runtime_error(what + " has no argument '" + key + "'");
    }
  }
}

std::string strip(const std::string& s, std::string_view chars, bool left, bool right) {
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end && chars.find(s[begin]) != std::string_view::npos) ++begin;
  }
  if (right) {
    while (end > begin && chars.find(s[end - 1]) != std::string_view::npos) --end;
  }
  return s.substr(begin, end - begin);
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_case(s, false);
  if (!out.empty()) out[0] = ascii_case(out.substr(0, 1), true)[0];
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = ascii_case(std::string(1, c), start)[0];
    start = !letter;
  }
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) throw runtime_error("replace: the text to replace is empty");
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  return out + s.substr(pos);
}

// The items a filter or loop iterates, as a list of their own (see elements()).
List iterate(const std::string& what, const Value& v) {
  List scratch;
  const List& all = elements(what, v, scratch);
  if (&all == &scratch) return scratch;
  return all;
}

Value items(const Value& v) {
  if (!v.is_dict()) throw runtime_error("items needs a dict, got " + std::string(v.type_name()));
  List out;
  for (const auto& [key, value] : v.as_dict())
    out.push_back(Value::list({Value::string(key), value}));
  return Value::list(std::move(out));
}

int64_t to_int(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kInt:
      return v.as_int();
    case Value::Kind::kFloat:
      return static_cast<int64_t>(v.as_number());
    case Value::Kind::kBool:
      return v.as_bool() ? 1 : 0;
    case Value::Kind::kString:
      try {
        size_t used = 0;
        const int64_t i = std::stoll(v.as_string(), &used);
        return used == v.as_string().size() ? i : 0;
      } catch (const std::exception&) {
        return 0;  // Jinja's int filter falls back to its default, 0
      }
    default:
      return 0;
  }
}

Value select(const std::string& name, const Value& target, const Arguments& args) {
  const bool by_attribute = name == "selectattr" || name == "rejectattr";
  const bool keep_matches = name == "select" || name == "selectattr";
  Arguments rest = args;
  std::string attribute;
  if (by_attribute) {
    if (rest.empty()) throw runtime_error(name + " needs an attribute name");
    attribute = expect_string(name, rest.front());
    rest.erase(rest.begin());
  }
  std::string test;
  if (!rest.empty()) {
    test = expect_string(name, rest.front());
    rest.erase(rest.begin());
    if (!is_test(test)) throw runtime_error(name + ": unknown test '" + test + "'");
  }
  List out;
  for (const Value& item : iterate(name, target)) {
    const Value subject = by_attribute ? item.get(attribute) : item;
    const bool match = test.empty() ? subject.truthy() : apply_test(test, subject, rest);
    if (match == keep_matches) out.push_back(item);
  }
  return Value::list(std::move(out));
}

}  // namespace

std::vector<Value> characters(const std::string& text) {
  std::vector<Value> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    out.push_back(Value::string(text.substr(i, n)));
    i += n;
  }
  return out;
}

const List& elements(const std::string& what, const Value& v, List& scratch) {
  if (v.is_list()) return v.as_list();
  scratch.clear();
  if (v.is_dict()) {
    for (const auto& [key, value] : v.as_dict()) scratch.push_back(Value::string(key));
  } else if (v.is_string()) {
    scratch = characters(v.as_string());
  } else if (!v.is_undefined()) {
    throw std::runtime_error(what + ": cannot iterate over a " + std::string(v.type_name()));
  }
  return scratch;
}

bool is_filter(std::string_view name) { return kFilters.contains(name); }
bool is_test(std::string_view name) { return kTests.contains(name); }
bool is_function(std::string_view name) { return kFunctions.contains(name); }
bool is_method(std::string_view name) { return kMethods.contains(name); }

Value apply_filter(const std::string& name, const Value& target, const Arguments& args,
                   const KeywordArguments& kwargs) {
  const std::string what = "filter '" + name + "'";
  if (name == "default" || name == "d") {
    no_keywords(what, kwargs, {"default_value", "boolean"});
    expect_count(what, args, 0, 2);
    Value fallback = args.empty() ? keyword(kwargs, "default_value") : args[0];
    if (fallback.is_undefined()) fallback = Value::string("");
    const bool boolean = args.size() > 1 ? args[1].truthy() : keyword(kwargs, "boolean").truthy();
    return (target.is_undefined() || (boolean && !target.truthy())) ? fallback : target;
  }
  if (target.is_undefined() && name != "string" && name != "length" && name != "count" &&
      name != "list" && name != "safe") {
    throw runtime_error(what + " applied to an undefined value");
  }
  if (name == "tojson") {
    no_keywords(what, kwargs, {"indent", "ensure_ascii", "sort_keys"});
    expect_count(what, args, 0, 1);
    const Value indent = args.empty() ? keyword(kwargs, "indent") : args[0];
    if (keyword(kwargs, "sort_keys").truthy()) throw runtime_error(what + ": sort_keys");
    if (!indent.is_undefined() && !indent.is_none() && indent.kind() != Value::Kind::kInt) {
      throw runtime_error(what + ": indent must be an integer");
    }
    return Value::string(target.to_json(indent.kind() == Value::Kind::kInt
                                            ? std::optional<int>(static_cast<int>(indent.as_int()))
                                            : std::nullopt));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    no_keywords(what, kwargs);
    return select(name, target, args);
  }
  if (name == "map") {
    // map(attribute='x') or map('filter', args...)
    List out;
    const Value attribute = keyword(kwargs, "attribute");
    if (!attribute.is_undefined()) {
      no_keywords(what, kwargs, {"attribute", "default"});
      expect_count(what, args, 0, 0);
      const Value fallback = keyword(kwargs, "default");
      const std::string& key = expect_string(what, attribute);
      for (const Value& item : iterate(what, target)) {
        const Value v = item.get(key);
        out.push_back(v.is_undefined() ? fallback : v);
      }
      return Value::list(std::move(out));
    }
    if (args.empty()) throw runtime_error(what + " needs a filter name or attribute=");
    const std::string& filter = expect_string(what, args[0]);
    if (!is_filter(filter)) throw runtime_error(what + ": unknown filter '" + filter + "'");
    const Arguments rest(args.begin() + 1, args.end());
    for (const Value& item : iterate(what, target)) {
      out.push_back(apply_filter(filter, item, rest, kwargs));
    }
    return Value::list(std::move(out));
  }
  if (name == "join") {
    no_keywords(what, kwargs, {"d", "attribute"});
    expect_count(what, args, 0, 1);
    const std::string separator =
        args.empty() ? keyword(kwargs, "d").str() : expect_string(what, args[0]);
    const Value attribute = keyword(kwargs, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(what, target)) {
      if (!first) out += separator;
      first = false;
      out += attribute.is_undefined() ? item.str() : item.get(attribute.str()).str();
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    no_keywords(what, kwargs);
    expect_count(what, args, 2, 2);
    return Value::string(
        replace_all(target.str(), expect_string(what, args[0]), expect_string(what, args[1])));
  }
  no_keywords(what, kwargs);
  if (name == "trim") {
    expect_count(what, args, 0, 1);
    return Value::string(
        strip(target.str(), args.empty() ? kWhitespace : expect_string(what, args[0]), true, true));
  }
  expect_count(what, args, 0, 0);
  if (name == "length" || name == "count") {
    if (target.is_string())
      return Value::integer(static_cast<int64_t>(characters(target.as_string()).size()));
    if (target.is_list()) return Value::integer(static_cast<int64_t>(target.as_list().size()));
    if (target.is_dict()) return Value::integer(static_cast<int64_t>(target.as_dict().size()));
    if (target.is_undefined()) return Value::integer(0);
    throw runtime_error(what + ": a " + std::string(target.type_name()) + " has no length");
  }
  if (name == "upper") return Value::string(ascii_case(target.str(), true));
  if (name == "lower") return Value::string(ascii_case(target.str(), false));
  if (name == "capitalize") return Value::string(capitalize(target.str()));
  if (name == "string") return Value::string(target.str());
  if (name == "safe") return target;
  if (name == "int") return Value::integer(to_int(target));
  if (name == "float") {
    if (target.is_number()) return Value::floating(target.as_number());
    try {
      return Value::floating(std::stod(target.str()));
    } catch (const std::exception&) {
      return Value::floating(0.0);
    }
  }
  if (name == "abs") {
    if (target.kind() == Value::Kind::kInt) {
      if (target.as_int() == INT64_MIN) throw runtime_error(what + ": integer overflow");
      return Value::integer(std::abs(target.as_int()));
    }
    if (target.is_number()) return Value::floating(std::abs(target.as_number()));
    throw runtime_error(what + " needs a number");
  }
  if (name == "items") return items(target);
  if (name == "list") return Value::list(iterate(what, target));
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char c : target.str()) {
      const bool space = kWhitespace.find(c) != std::string_view::npos;
      if (!space && !in_word) ++words;
      in_word = !space;
    }
    return Value::integer(words);
  }
  if (name == "unique") {
    List out;
    for (const Value& item : iterate(what, target)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& v) { return equal(v, item); })) {
        out.push_back(item);
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "first" || name == "last") {
    List scratch;
    const List& all = elements(what, target, scratch);
    if (all.empty()) return {};
    return name == "first" ? all.front() : all.back();
  }
  throw runtime_error("unknown " + what);
}

bool apply_test(const std::string& name, const Value& target, const Arguments& args) {
  const std::string what = "test '" + name + "'";
  const bool binary =
      name == "divisibleby" || name == "equalto" || name == "eq" || name == "ne" || name == "in";
  expect_count(what, args, binary ? 1 : 0, binary ? 1 : 0);
  if (name == "defined") return !target.is_undefined();
  if (name == "undefined") return target.is_undefined();
  if (name == "none") return target.is_none();
  if (name == "string") return target.is_string();
  if (name == "number") return target.is_number();
  if (name == "integer") return target.kind() == Value::Kind::kInt;
  if (name == "float") return target.kind() == Value::Kind::kFloat;
  if (name == "boolean") return target.kind() == Value::Kind::kBool;
  if (name == "true") return target.kind() == Value::Kind::kBool && target.as_bool();
  if (name == "false") return target.kind() == Value::Kind::kBool && !target.as_bool();
  if (name == "mapping") return target.is_dict();
  if (name == "iterable") return target.is_list() || target.is_dict() || target.is_string();
  if (name == "sequence") return target.is_list() || target.is_dict() || target.is_string();
  if (name == "equalto" || name == "eq") return equal(target, args[0]);
  if (name == "ne") return !equal(target, args[0]);
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (target.kind() != Value::Kind::kInt) throw runtime_error(what + " needs an integer");
    if (name == "odd") return target.as_int() % 2 != 0;
    if (name == "even") return target.as_int() % 2 == 0;
    if (args[0].kind() != Value::Kind::kInt || args[0].as_int() == 0) {
      throw runtime_error(what + " needs a non-zero integer divisor");
    }
    return target.as_int() % args[0].as_int() == 0;
  }
  if (name == "in") {
    const Value& container = args[0];
    if (container.is_string() && target.is_string()) {
      return container.as_string().find(target.as_string()) != std::string::npos;
    }
    List scratch;
    const List& all = elements(what, container, scratch);
    return std::any_of(all.begin(), all.end(), [&](const Value& v) { return equal(v, target); });
  }
  throw runtime_error("unknown " + what);
}

Value call_function(const std::string& name, const Arguments& args,
                    const KeywordArguments& kwargs) {
  const std::string what = "function '" + name + "'";
  if (name == "namespace") {
    expect_count(what, args, 0, 0);
    Dict fields;
    for (const auto& [key, value] : kwargs) fields.emplace_back(key, value);
    return Value::dict(std::move(fields), true);
  }
  no_keywords(what, kwargs);
  if (name == "range") {
    expect_count(what, args, 1, 3);
    for (const Value& a : args) {
      if (a.kind() != Value::Kind::kInt) throw runtime_error(what + " needs integers");
    }
    const int64_t start = args.size() > 1 ? args[0].as_int() : 0;
    const int64_t stop = args.size() > 1 ? args[1].as_int() : args[0].as_int();
    const int64_t step = args.size() > 2 ? args[2].as_int() : 1;
    if (step == 0) throw runtime_error(what + ": the step is 0");
    List out;
    constexpr size_t kMaxItems = 1'000'000;  // a template has no business with more
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (out.size() == kMaxItems) throw runtime_error(what + ": more than 1000000 items");
      out.push_back(Value::integer(i));
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return Value::list(std::move(out));
  }
  if (name == "strftime_now") {
    expect_count(what, args, 1, 1);
    const std::string& format = expect_string(what, args[0]);
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[256];
    const size_t n = std::strftime(buffer, sizeof(buffer), format.c_str(), &local);
    return Value::string(std::string(buffer, n));
  }
  throw runtime_error("unknown " + what);
}

Value call_method(const std::string& name, const Value& target, const Arguments& args,
                  const KeywordArguments& kwargs) {
  const std::string what = "method '" + name + "'";
  no_keywords(what, kwargs);
  if (target.is_dict()) {
    if (name == "items") {
      expect_count(what, args, 0, 0);
      return items(target);
    }
    if (name == "keys" || name == "values") {
      expect_count(what, args, 0, 0);
      List out;
      for (const auto& [key, value] : target.as_dict()) {
        out.push_back(name == "keys" ? Value::string(key) : value);
      }
      return Value::list(std::move(out));
    }
    if (name == "get") {
      expect_count(what, args, 1, 2);
      const Value v = target.get(expect_string(what, args[0]));
      return v.is_undefined() ? (args.size() > 1 ? args[1] : Value::none()) : v;
    }
  }
  if (target.is_string()) {
    const std::string& s = target.as_string();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      expect_count(what, args, 0, 1);
      const std::string_view chars =
          args.empty() || args[0].is_none() ? kWhitespace : expect_string(what, args[0]);
      return Value::string(strip(s, chars, name != "rstrip", name != "lstrip"));
    }
    if (name == "upper" || name == "lower") {
      expect_count(what, args, 0, 0);
      return Value::string(ascii_case(s, name == "upper"));
    }
    if (name == "capitalize") {
      expect_count(what, args, 0, 0);
      return Value::string(capitalize(s));
    }
    if (name == "title") {
      expect_count(what, args, 0, 0);
      return Value::string(title(s));
    }
    if (name == "startswith" || name == "endswith") {
      expect_count(what, args, 1, 1);
      const std::string& affix = expect_string(what, args[0]);
      return Value::boolean(name == "startswith" ? s.starts_with(affix) : s.ends_with(affix));
    }
    if (name == "replace") {
      expect_count(what, args, 2, 2);
      return Value::string(
          replace_all(s, expect_string(what, args[0]), expect_string(what, args[1])));
    }
    if (name == "split") {
      expect_count(what, args, 0, 1);
      List out;
      if (args.empty() || args[0].is_none()) {
        size_t i = 0;
        while (i < s.size()) {
          while (i < s.size() && kWhitespace.find(s[i]) != std::string_view::npos) ++i;
          const size_t begin = i;
          while (i < s.size() && kWhitespace.find(s[i]) == std::string_view::npos) ++i;
          if (i > begin) out.push_back(Value::string(s.substr(begin, i - begin)));
        }
      } else {
        const std::string& separator = expect_string(what, args[0]);
        if (separator.empty()) throw runtime_error(what + ": empty separator");
        size_t pos = 0;
        for (size_t hit; (hit = s.find(separator, pos)) != std::string::npos;
             pos = hit + separator.size()) {
          out.push_back(Value::string(s.substr(pos, hit - pos)));
        }
        out.push_back(Value::string(s.substr(pos)));
      }
      return Value::list(std::move(out));
    }
  }
  throw runtime_error("a " + std::string(target.type_name()) + " has no " + what);
}

}  // namespace headway::serving::jinja
