#include "json_schema.h"

#include <fmt/format.h>
#include <headway/serving/json_text.h>
#include <headway/serving/service_error.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "schema_number_bounds.h"
#include "string_formats.h"

namespace headway::serving::guided {

namespace {

using Json = nlohmann::ordered_json;

// Keywords that describe a schema without constraining its values.
constexpr std::array<std::string_view, 12> kAnnotations = {
    "title",    "description", "default",  "examples",  "$schema", "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};

// The largest minLength or maxLength beside a pattern or format: the length is counted in the
// pattern's automaton (exact, so no string is left unable to end), which grows with it. 4,096
// takes pydantic's URL bound (2,083).
constexpr uint32_t kMaxPatternLength = 4096;

// Keywords each value type reads; anything else on a schema is refused.
const std::set<std::string_view>& handled_keywords() {
  static const std::set<std::string_view> keywords = {"type",
                                                      "properties",
                                                      "required",
                                                      "additionalProperties",
                                                      "items",
                                                      "prefixItems",
                                                      "additionalItems",
                                                      "minItems",
                                                      "maxItems",
                                                      "minLength",
                                                      "maxLength",
                                                      "pattern",
                                                      "format",
                                                      "enum",
                                                      "const",
                                                      "anyOf",
                                                      "oneOf",
                                                      "allOf",
                                                      "$ref",
                                                      "minimum",
                                                      "maximum",
                                                      "exclusiveMinimum",
                                                      "exclusiveMaximum",
                                                      "multipleOf",
                                                      "minProperties",
                                                      "maxProperties",
                                                      "propertyNames",
                                                      "patternProperties"};
  return keywords;
}

// uniqueItems constrains only when true (false, the default, asks for nothing, wherever it is).
bool asks_unique_items(const Json& schema) {
  return schema.value("uniqueItems", Json(false)) == Json(true);
}

[[noreturn]] void refuse(const std::string& path, const std::string& message) {
  throw ServiceError(ErrorCode::kInvalidArgument, fmt::format("{}: {}", path, message), path);
}

// A JSON value as a literal the output must match: compact JSON text, as models write it.
std::string literal_text(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, std::string field) : root_(root), field_(std::move(field)) {}

  Grammar compile() {
    grammar_.root = compile_schema(root_, field_, 0);
    check_no_empty_cycles();
    return std::move(grammar_);
  }

 private:
  uint32_t add(GrammarNode node) {
    if (grammar_.nodes.size() >= kMaxNodes) {
      refuse(field_, fmt::format("the schema has more than {} values and choices to follow; "
                                 "guided decoding takes smaller ones",
                                 kMaxNodes));
    }
    grammar_.nodes.push_back(std::move(node));
    return static_cast<uint32_t>(grammar_.nodes.size() - 1);
  }

  uint32_t literals(std::vector<std::string> texts) {
    GrammarNode node;
    node.kind = NodeKind::kLiterals;
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    node.literals = std::move(texts);
    return add(std::move(node));
  }

  // Any JSON value; built once per grammar.
  uint32_t any_value() {
    if (any_) return *any_;
    const uint32_t any = add({});  // filled below: objects and arrays refer back to it
    any_ = any;
    GrammarNode object;
    object.kind = NodeKind::kObject;
    object.free_keys = true;
    object.free_value = any;
    GrammarNode array;
    array.kind = NodeKind::kArray;
    array.items = any;
    GrammarNode string;
    string.kind = NodeKind::kString;
    GrammarNode number;
    number.kind = NodeKind::kNumber;
    const std::vector<uint32_t> branches = {add(std::move(object)), add(std::move(array)),
                                            add(std::move(string)), add(std::move(number)),
                                            literals({"true", "false", "null"})};
    grammar_.nodes[any].kind = NodeKind::kAnyOf;
    grammar_.nodes[any].branches = branches;
    return any;
  }

  static uint32_t count_of(const Json& schema, const char* keyword, const std::string& path,
                           uint32_t fallback) {
    const auto it = schema.find(keyword);
    if (it == schema.end()) return fallback;
    if (!it->is_number_integer() && !it->is_number_unsigned()) {
      refuse(path + "." + keyword, "must be a non-negative integer");
    }
    if (it->is_number_integer() && it->get<int64_t>() < 0) {
      refuse(path + "." + keyword, "must be a non-negative integer");
    }
    const uint64_t value = it->get<uint64_t>();
    return static_cast<uint32_t>(std::min<uint64_t>(value, kUnbounded));
  }

  // Each schema object is compiled once, however many places use it (a list of types, a $ref),
  // so that a small schema cannot grow into an exponential grammar.
  uint32_t compile_schema(const Json& schema, const std::string& path, int depth) {
    if (const auto known = compiled_.find(&schema); known != compiled_.end()) {
      return known->second;
    }
    const uint32_t node = compile_uncached(schema, path, depth);
    compiled_.emplace(&schema, node);
    return node;
  }

  // $ref, allOf, anyOf, oneOf are read alone, and enum and const with at most a type: a keyword
  // beside them that would constrain the value is refused rather than dropped.
  static void refuse_siblings(const Json& schema, const std::string& path) {
    static constexpr std::array<std::string_view, 6> kAlone = {"$ref",  "allOf", "anyOf",
                                                               "oneOf", "const", "enum"};
    const auto lead = std::find_if(kAlone.begin(), kAlone.end(),
                                   [&](std::string_view k) { return schema.contains(k); });
    if (lead == kAlone.end()) return;
    const bool literal = *lead == "const" || *lead == "enum";
    for (const auto& [keyword, value] : schema.items()) {
      const bool constrains = handled_keywords().count(keyword) != 0 ||
                              (keyword == "uniqueItems" && asks_unique_items(schema));
      if (keyword == *lead || !constrains) continue;
      if (literal && (keyword == "type" || keyword == "enum")) continue;  // pydantic writes these
      refuse(path + "." + keyword,
             fmt::format("'{}' cannot be combined with '{}' in one schema: guided decoding reads "
                         "'{}' alone (move the constraint into it)",
                         keyword, *lead, *lead));
    }
  }

  uint32_t compile_uncached(const Json& schema, const std::string& path, int depth) {
    if (depth > kMaxJsonDepth) refuse(path, "nests too deep");
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) refuse(path, "the schema false matches nothing");
      return any_value();
    }
    if (!schema.is_object()) refuse(path, "a schema must be an object or a boolean");
    for (const auto& [keyword, value] : schema.items()) {
      if (handled_keywords().count(keyword) != 0) continue;
      if (keyword == "uniqueItems") {  // read by arrays (compile_array); on others it is moot
        if (!value.is_boolean()) refuse(path + "." + keyword, "must be a boolean");
        continue;
      }
      if (std::find(kAnnotations.begin(), kAnnotations.end(), keyword) != kAnnotations.end()) {
        continue;
      }
      refuse(path + "." + keyword,
             fmt::format(
                 "the keyword '{}' is not supported by guided decoding (supported: type, "
                 "properties, required, additionalProperties, minProperties, maxProperties, "
                 "propertyNames, patternProperties (one pattern), items, prefixItems, minItems, "
                 "maxItems, uniqueItems (of enum values), minLength, maxLength, pattern, format, "
                 "minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf (integers), "
                 "enum, const, anyOf, oneOf, allOf of one schema, $ref)",
                 keyword));
    }
    refuse_siblings(schema, path);
    if (const auto ref = schema.find("$ref"); ref != schema.end()) {
      return compile_ref(*ref, path + ".$ref", depth);
    }
    if (const auto all = schema.find("allOf"); all != schema.end()) {
      if (!all->is_array() || all->size() != 1) {
        refuse(path + ".allOf", "only an allOf of exactly one schema is supported");
      }
      return compile_schema((*all)[0], path + ".allOf[0]", depth + 1);
    }
    if (const auto constant = schema.find("const"); constant != schema.end()) {
      return literals({literal_text(*constant)});
    }
    if (const auto values = schema.find("enum"); values != schema.end()) {
      if (!values->is_array() || values->empty()) {
        refuse(path + ".enum", "must be a non-empty array");
      }
      if (values->size() > kMaxLiterals) {
        refuse(path + ".enum", fmt::format("has {} values; guided decoding takes at most {}",
                                           values->size(), kMaxLiterals));
      }
      std::vector<std::string> texts;
      for (const Json& value : *values) texts.push_back(literal_text(value));
      return literals(std::move(texts));
    }
    for (const char* keyword : {"anyOf", "oneOf"}) {
      const auto options = schema.find(keyword);
      if (options == schema.end()) continue;
      if (!options->is_array() || options->empty()) {
        refuse(path + "." + keyword, "must be a non-empty array of schemas");
      }
      GrammarNode node;
      node.kind = NodeKind::kAnyOf;
      for (size_t i = 0; i < options->size(); ++i) {
        node.branches.push_back(
            compile_schema((*options)[i], fmt::format("{}.{}[{}]", path, keyword, i), depth + 1));
      }
      return add(std::move(node));
    }
    const auto type = schema.find("type");
    if (type == schema.end()) return compile_untyped(schema, path, depth);
    if (type->is_string()) return compile_typed(schema, type->get<std::string>(), path, depth);
    if (!type->is_array() || type->empty()) {
      refuse(path + ".type", "must be a type name or a non-empty array of them");
    }
    GrammarNode node;
    node.kind = NodeKind::kAnyOf;
    std::set<std::string> seen;
    for (const Json& name : *type) {
      if (!name.is_string()) refuse(path + ".type", "must be a type name or an array of them");
      if (!seen.insert(name.get<std::string>()).second) continue;  // ["string", "string"]
      node.branches.push_back(compile_typed(schema, name.get<std::string>(), path, depth));
    }
    return add(std::move(node));
  }

  // minimum, maximum, exclusiveMinimum, exclusiveMaximum (a number, or draft 4's boolean beside
  // minimum/maximum) as inclusive integer bounds. Any of them makes the integer a bounded one,
  // which is also held to 64 bits.
  static IntegerRange integer_range(const Json& schema, const std::string& path) {
    IntegerRange range;
    // 2^63, exactly, whatever long double is.
    constexpr long double kTwoTo63 = 9223372036854775808.0L;
    const auto bound = [&](const char* keyword, bool draft4) -> std::optional<long double> {
      const auto it = schema.find(keyword);
      if (it == schema.end() || (draft4 && it->is_boolean())) return std::nullopt;
      if (!it->is_number()) {
        refuse(path + "." + keyword,
               draft4 ? "must be a number (or, beside minimum or maximum, a boolean)"
                      : "must be a number");
      }
      range.enforced = true;
      return it->get<long double>();
    };
    const auto exclusive = [&](const char* keyword) {
      const auto it = schema.find(keyword);
      return it != schema.end() && it->is_boolean() && it->get<bool>();
    };
    // Past 64 bits a lower bound leaves no integer this writes (refused); an upper one changes
    // nothing (a bounded integer is held to 64 bits).
    const auto low_from = [&](long double v, const char* keyword) {
      if (v >= kTwoTo63) refuse(path + "." + keyword, "no integer of 64 bits is that large");
      return v < -kTwoTo63 ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(v);
    };
    const auto high_from = [&](long double v, const char* keyword) {
      if (v < -kTwoTo63) refuse(path + "." + keyword, "no integer of 64 bits is that small");
      return v >= kTwoTo63 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(v);
    };
    if (auto v = bound("minimum", false)) {
      range.low =
          low_from(exclusive("exclusiveMinimum") ? std::floor(*v) + 1 : std::ceil(*v), "minimum");
    }
    if (auto v = bound("exclusiveMinimum", true)) {
      range.low = std::max(range.low, low_from(std::floor(*v) + 1, "exclusiveMinimum"));
    }
    if (auto v = bound("maximum", false)) {
      range.high =
          high_from(exclusive("exclusiveMaximum") ? std::ceil(*v) - 1 : std::floor(*v), "maximum");
    }
    if (auto v = bound("exclusiveMaximum", true)) {
      range.high = std::min(range.high, high_from(std::ceil(*v) - 1, "exclusiveMaximum"));
    }
    if (range.low > range.high) {
      refuse(path + (schema.contains("minimum") ? ".minimum" : ".exclusiveMinimum"),
             fmt::format("no integer lies between the bounds ({} to {})", range.low, range.high));
    }
    if (const auto it = schema.find("multipleOf"); it != schema.end()) {
      const bool whole =
          it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() > 0) ||
          (it->is_number_float() && it->get<double>() > 0 && it->get<double>() < 9.2e18 &&
           std::floor(it->get<double>()) == it->get<double>());
      if (!whole || (it->is_number_unsigned() && it->get<uint64_t>() == 0)) {
        refuse(path + ".multipleOf",
               "guided decoding takes a positive whole multipleOf below 2^63 on integers");
      }
      range.multiple =
          it->is_number_float() ? static_cast<uint64_t>(it->get<double>()) : it->get<uint64_t>();
      range.enforced = true;
      if (!range.holds_multiple(range.low, range.high)) {
        refuse(path + ".multipleOf",
               fmt::format("no multiple of {} lies between the bounds", range.multiple));
      }
    }
    return range;
  }

  // No "type": what the keywords imply, else any value.
  uint32_t compile_untyped(const Json& schema, const std::string& path, int depth) {
    if (schema.contains("multipleOf")) {
      refuse(path + ".multipleOf",
             "guided decoding enforces multipleOf on \"type\": \"integer\" only: give the type");
    }
    // Numeric bounds constrain numbers only: without a type they make the value a number, unless
    // keywords of another type say it may be something else (then the type must be given).
    const char* bound = nullptr;
    for (const char* keyword : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (const auto it = schema.find(keyword); it != schema.end() && it->is_number()) {
        bound = keyword;
      }
    }
    if (bound != nullptr) {
      for (const char* other :
           {"properties", "required", "additionalProperties", "minProperties", "maxProperties",
            "propertyNames", "patternProperties", "items", "prefixItems", "minItems", "maxItems",
            "uniqueItems", "minLength", "maxLength", "pattern", "format"}) {
        if (other == std::string_view("uniqueItems") ? asks_unique_items(schema)
                                                     : schema.contains(other)) {
          refuse(path + "." + bound,
                 fmt::format("'{}' beside '{}' without a \"type\": give the type (or a list "
                             "of types) the value may have",
                             bound, other));
        }
      }
      return compile_typed(schema, "number", path, depth);
    }
    if (schema.contains("properties") || schema.contains("required") ||
        schema.contains("additionalProperties") || schema.contains("minProperties") ||
        schema.contains("maxProperties") || schema.contains("propertyNames") ||
        schema.contains("patternProperties")) {
      return compile_typed(schema, "object", path, depth);
    }
    if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems") ||
        schema.contains("prefixItems") || asks_unique_items(schema)) {
      return compile_typed(schema, "array", path, depth);
    }
    if (schema.contains("minLength") || schema.contains("maxLength") ||
        schema.contains("pattern") || schema.contains("format")) {
      return compile_typed(schema, "string", path, depth);
    }
    return any_value();
  }

  uint32_t compile_typed(const Json& schema, const std::string& type, const std::string& path,
                         int depth) {
    GrammarNode node;
    if (type == "object") return compile_object(schema, path, depth);
    if (type == "array") return compile_array(schema, path, depth);
    if (type == "string") {
      node.kind = NodeKind::kString;
      node.min_length = count_of(schema, "minLength", path, 0);
      node.max_length = count_of(schema, "maxLength", path, kUnbounded);
      if (node.min_length > node.max_length) {
        refuse(path + ".minLength", "is above maxLength: no string matches");
      }
      if (schema.contains("pattern") || schema.contains("format")) {
        node.pattern = string_pattern(schema, path, node.min_length, node.max_length);
      }
      return add(std::move(node));
    }
    if (type == "integer") {
      node.kind = NodeKind::kInteger;
      node.range = integer_range(schema, path);
      return add(std::move(node));
    }
    if (type == "number") {
      if (schema.contains("multipleOf")) {
        refuse(path + ".multipleOf",
               "guided decoding enforces multipleOf on \"type\": \"integer\" only, not on "
               "numbers");
      }
      node.kind = NodeKind::kNumber;
      node.number = number_range_of(schema, path);
      return add(std::move(node));
    }
    if (type == "boolean") return literals({"true", "false"});
    if (type == "null") return literals({"null"});
    refuse(path + ".type", fmt::format("unknown type '{}' (object, array, string, number, "
                                       "integer, boolean or null)",
                                       type));
  }

  uint32_t compile_object(const Json& schema, const std::string& path, int depth) {
    GrammarNode node;
    node.kind = NodeKind::kObject;
    std::map<std::string, size_t> index;  // property name -> place in node.properties
    std::vector<std::string> names;
    if (const auto properties = schema.find("properties"); properties != schema.end()) {
      if (!properties->is_object()) refuse(path + ".properties", "must be an object");
      if (properties->size() > kMaxProperties) {
        refuse(path + ".properties",
               fmt::format("has {} properties; guided decoding takes at most {}",
                           properties->size(), kMaxProperties));
      }
      for (const auto& [name, property] : properties->items()) {
        GrammarProperty entry;
        entry.key = literal_text(Json(name));
        entry.key = entry.key.substr(1, entry.key.size() - 2);
        entry.value = compile_schema(property, path + ".properties." + name, depth + 1);
        index.emplace(name, node.properties.size());
        node.properties.push_back(std::move(entry));
      }
    }
    if (const auto required = schema.find("required"); required != schema.end()) {
      if (!required->is_array()) refuse(path + ".required", "must be an array of names");
      for (size_t i = 0; i < required->size(); ++i) {
        const Json& name = (*required)[i];
        if (!name.is_string()) {
          refuse(fmt::format("{}.required[{}]", path, i), "must be a property name");
        }
        const auto found = index.find(name.get<std::string>());
        if (found != index.end()) {
          node.properties[found->second].required = true;
          continue;
        }
        // Required but not described: any value, after the described ones.
        GrammarProperty entry;
        entry.key = literal_text(name);
        entry.key = entry.key.substr(1, entry.key.size() - 2);
        entry.value = any_value();
        entry.required = true;
        index.emplace(name.get<std::string>(), node.properties.size());
        node.properties.push_back(std::move(entry));
      }
    }
    if (node.properties.size() > kMaxProperties) {  // required names add to the declared ones
      refuse(path + ".required",
             fmt::format("names {} properties with those of properties; guided decoding takes at "
                         "most {}",
                         node.properties.size(), kMaxProperties));
    }
    const auto additional = schema.find("additionalProperties");
    if (additional != schema.end() && !additional->is_boolean() && !additional->is_object()) {
      refuse(path + ".additionalProperties", "must be a boolean or a schema");
    }
    const bool patterned = pattern_properties(schema, path, depth, node);
    if (node.properties.empty() && !patterned) {
      const bool closed =
          additional != schema.end() && additional->is_boolean() && !additional->get<bool>();
      if (!closed) {
        node.free_keys = true;
        node.free_value =
            additional == schema.end() || additional->is_boolean()
                ? any_value()
                : compile_schema(*additional, path + ".additionalProperties", depth + 1);
      }
    }
    property_names(schema, path, depth, node);
    property_counts(schema, path, node);
    return add(std::move(node));
  }

  // Why propertyNames and patternProperties are refused beside declared properties.
  static constexpr const char* kOnlyWithoutDeclaredProperties =
      "is enforced only on objects without declared properties (properties, required): a dict's "
      "keys, as pydantic writes them";

  // patternProperties of one pattern (pydantic writes it for dict[constr(pattern=...), ...]), on
  // an object without declared properties: every key is a string the pattern matches (searched,
  // as "pattern" is) and every value follows the pattern's schema. Keys the pattern does not
  // match are not written even where additionalProperties allows them, as undeclared keys are
  // not beside declared ones: the answer is still valid. Returns whether it shaped the keys.
  bool pattern_properties(const Json& schema, const std::string& path, int depth,
                          GrammarNode& node) {
    const auto patterns = schema.find("patternProperties");
    if (patterns == schema.end()) return false;
    const std::string at = path + ".patternProperties";
    if (!patterns->is_object()) refuse(at, "must be an object");
    if (patterns->empty()) return false;
    if (!node.properties.empty()) {
      refuse(at, kOnlyWithoutDeclaredProperties);
    }
    if (patterns->size() > 1) {
      refuse(at, fmt::format("has {} patterns; guided decoding takes one (a key matching several "
                             "would have to meet each one's schema)",
                             patterns->size()));
    }
    if (const auto names = schema.find("propertyNames");
        names != schema.end() && !(names->is_boolean() && names->get<bool>())) {
      refuse(at,
             "cannot be combined with propertyNames: guided decoding shapes keys by one of "
             "them");
    }
    const std::string pattern = patterns->begin().key();
    const Json& value = patterns->begin().value();
    const std::string place = at + "." + pattern;
    GrammarNode key;
    key.kind = NodeKind::kString;
    key.pattern = string_pattern(Json{{"pattern", pattern}}, place, 0, kUnbounded, place);
    node.free_keys = true;
    node.free_key = add(std::move(key));
    node.free_value = compile_schema(value, place, depth + 1);
    return true;
  }

  // propertyNames, the schema every key follows (pydantic writes it for dict[SomeEnum, ...] and
  // dict[Literal[...], ...]): on free keys, whose key then is a value of that schema. Beside
  // declared properties it is refused: only those keys are written, and each would have to be
  // checked against it.
  void property_names(const Json& schema, const std::string& path, int depth, GrammarNode& node) {
    const auto names = schema.find("propertyNames");
    if (names == schema.end() || (names->is_boolean() && names->get<bool>())) return;
    const std::string at = path + ".propertyNames";
    if (!node.properties.empty()) {
      refuse(at, kOnlyWithoutDeclaredProperties);
    }
    if (names->is_boolean()) {  // false: no key at all, so {} alone
      if (node.free_keys) node.max_properties = 0;
      return;
    }
    const uint32_t keys = compile_schema(*names, at, depth + 1);
    if (!node.free_keys) return;        // additionalProperties false: {} alone, no key to check
    if (any_ && keys == *any_) return;  // {}: any key (compiling it made any_)
    if (!only_strings(keys)) {
      refuse(at,
             "must describe strings, as keys are (a type \"string\" with its lengths, "
             "pattern or format, or an enum or const of strings)");
    }
    node.free_key = keys;
  }

  // Whether every value of `node` is a JSON string (choices through $ref's included). Each node
  // is looked at once: choices that share branches (a $ref used by many) cost no more.
  bool only_strings(uint32_t root) const {
    std::vector<bool> seen(grammar_.nodes.size(), false);
    std::vector<uint32_t> work = {root};
    while (!work.empty()) {
      const uint32_t node = work.back();
      work.pop_back();
      if (seen[node]) continue;
      seen[node] = true;
      const GrammarNode& value = grammar_.nodes[node];
      switch (value.kind) {
        case NodeKind::kString:
          break;
        case NodeKind::kLiterals:
          if (value.literals.empty() ||
              !std::all_of(value.literals.begin(), value.literals.end(),
                           [](const std::string& text) { return text.front() == '"'; })) {
            return false;
          }
          break;
        case NodeKind::kAnyOf:
          // (Empty: a $ref still being built, a schema that holds itself.)
          if (value.branches.empty()) return false;
          work.insert(work.end(), value.branches.begin(), value.branches.end());
          break;
        default:
          return false;
      }
    }
    return true;
  }

  // minProperties and maxProperties. Only declared keys are written where there are any, so
  // those must be able to meet the limits: an object the limits refuse would be a wrong answer,
  // and one no output can finish a stuck one.
  static void property_counts(const Json& schema, const std::string& path, GrammarNode& node) {
    node.min_properties = count_of(schema, "minProperties", path, 0);
    // (propertyNames false has already made it 0.)
    node.max_properties =
        std::min(node.max_properties, count_of(schema, "maxProperties", path, kUnbounded));
    if (node.min_properties > node.max_properties) {
      refuse(path + ".minProperties", "is above maxProperties: no object matches");
    }
    uint32_t required = 0;
    for (size_t i = node.properties.size(); i-- > 0;) {
      node.properties[i].required_after = required;
      if (node.properties[i].required) ++required;
    }
    if (node.free_keys) {
      // Free keys are not kept apart: {"a":1,"a":2} would count two where a parser keeps one.
      // (Too many is never the result: a repeated key only makes fewer.)
      if (node.min_properties > 1) {
        refuse(path + ".minProperties",
               "above 1 is enforced only on declared properties (guided decoding does not keep "
               "free keys apart, so a repeated key could make up the count): declare them in "
               "properties");
      }
      return;
    }
    if (node.min_properties > node.properties.size()) {
      refuse(path + ".minProperties",
             fmt::format("asks for {} properties, and guided decoding writes only the {} the "
                         "schema declares (properties and required): declare the ones the answer "
                         "should have",
                         node.min_properties, node.properties.size()));
    }
    if (node.max_properties < required) {
      refuse(path + ".maxProperties",
             fmt::format("allows {} properties, fewer than the {} required: no object matches",
                         node.max_properties, required));
    }
    // Limits every object of these properties meets are dropped: the matcher then counts nothing,
    // and places that differ only in a count nobody reads stay one (and share their masks).
    if (node.min_properties <= required) node.min_properties = 0;
    if (node.max_properties >= node.properties.size()) node.max_properties = kUnbounded;
  }

  // An array: `items` for every element, or a tuple (prefixItems, or draft 4 to 7's items as an
  // array) whose positions have their own schemas and whose rest follows items (additionalItems
  // in the old form; absent: any value, false: none).
  uint32_t compile_array(const Json& schema, const std::string& path, int depth) {
    GrammarNode node;
    node.kind = NodeKind::kArray;
    node.min_items = count_of(schema, "minItems", path, 0);
    node.max_items = count_of(schema, "maxItems", path, kUnbounded);
    if (node.min_items > node.max_items) {
      refuse(path + ".minItems", "is above maxItems: no array matches");
    }
    const auto items = schema.find("items");
    const auto prefix = schema.find("prefixItems");
    const bool old_tuple = items != schema.end() && items->is_array();
    if (old_tuple && prefix != schema.end()) {
      refuse(path + ".items", "cannot be an array beside prefixItems (two tuples)");
    }
    if (prefix != schema.end() || old_tuple) {
      const Json& positions = old_tuple ? *items : *prefix;
      const std::string at = path + (old_tuple ? ".items" : ".prefixItems");
      if (!positions.is_array() || positions.empty()) {
        refuse(at, "must be a non-empty array of schemas");
      }
      if (positions.size() > kMaxProperties) {
        refuse(at, fmt::format("has {} schemas; guided decoding takes at most {}", positions.size(),
                               kMaxProperties));
      }
      for (size_t k = 0; k < positions.size(); ++k) {
        node.prefix_items.push_back(
            compile_schema(positions[k], fmt::format("{}[{}]", at, k), depth + 1));
      }
    } else if (schema.contains("additionalItems")) {
      refuse(path + ".additionalItems", "applies only beside items given as an array");
    }
    // What follows the tuple, or every element.
    const char* rest_keyword = old_tuple ? "additionalItems" : "items";
    const auto rest = schema.find(rest_keyword);
    if (rest != schema.end() && rest->is_boolean() && !rest->get<bool>()) {
      const auto fixed = static_cast<uint32_t>(node.prefix_items.size());
      if (node.min_items > fixed) {
        refuse(path + "." + rest_keyword, fmt::format("is false but minItems asks for more than "
                                                      "{} items",
                                                      fixed));
      }
      node.max_items = std::min(node.max_items, fixed);
      node.items = any_value();
    } else {
      node.items = rest == schema.end()
                       ? any_value()
                       : compile_schema(*rest, path + "." + rest_keyword, depth + 1);
    }
    unique_items(schema, path, node);
    return add(std::move(node));
  }

  // uniqueItems true, on an array whose items are enum, const or boolean values: the matcher
  // remembers which it wrote. Elsewhere it is refused: keeping whole values apart as they are
  // written is not something the matcher does, and an answer that only looked unique would be a
  // silent wrong answer.
  void unique_items(const Json& schema, const std::string& path, GrammarNode& node) const {
    const auto unique = schema.find("uniqueItems");
    if (unique == schema.end()) return;
    if (!unique->is_boolean()) refuse(path + ".uniqueItems", "must be a boolean");
    if (!unique->get<bool>()) return;
    if (node.max_items <= 1) return;  // one item at most: nothing to repeat
    if (!node.prefix_items.empty()) {
      refuse(path + ".uniqueItems", "is enforced only on arrays without a tuple (prefixItems)");
    }
    uint32_t item = node.items;  // through $ref's one-branch choices to what they stand for
    while (grammar_.nodes[item].kind == NodeKind::kAnyOf &&
           grammar_.nodes[item].branches.size() == 1) {
      item = grammar_.nodes[item].branches.front();
    }
    const GrammarNode& values = grammar_.nodes[item];
    // (A node still being built, a schema that holds itself, is empty: refused here too.)
    if (values.kind != NodeKind::kLiterals || values.literals.empty()) {
      refuse(path + ".uniqueItems",
             "is enforced only on arrays whose items are enum, const or boolean values");
    }
    if (values.literals.size() > kMaxUniqueLiterals) {
      refuse(path + ".uniqueItems",
             fmt::format("is enforced on arrays of at most {} values to choose from; the items "
                         "have {}",
                         kMaxUniqueLiterals, values.literals.size()));
    }
    // Unordered objects: {"a":1,"b":2} and {"b":2,"a":1} are one value.
    std::vector<nlohmann::json> parsed;
    for (const std::string& text : values.literals) parsed.push_back(nlohmann::json::parse(text));
    for (size_t i = 0; i < parsed.size(); ++i) {
      for (size_t j = i + 1; j < parsed.size(); ++j) {
        if (parsed[i] == parsed[j]) {  // 1 and 1.0: written apart, equal as JSON
          refuse(path + ".uniqueItems",
                 fmt::format("the items' values {} and {} are equal as JSON, and guided decoding "
                             "keeps written values apart by their text",
                             values.literals[i], values.literals[j]));
        }
      }
    }
    const auto count = static_cast<uint32_t>(values.literals.size());
    if (node.min_items > count) {
      refuse(path + ".minItems",
             fmt::format("asks for {} unique items, and the items have only {} values",
                         node.min_items, count));
    }
    node.max_items = std::min(node.max_items, count);
    node.unique_items = true;
  }

  // "#", "#/$defs/Name", "#/definitions/Name" (any local JSON pointer). Compiled once; a schema
  // that refers to itself reaches the same node.
  uint32_t compile_ref(const Json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) refuse(path, "must be a string");
    const std::string target = ref.get<std::string>();
    if (const auto known = refs_.find(target); known != refs_.end()) return known->second;
    if (target.empty() || target[0] != '#') {
      refuse(path, fmt::format("'{}' is not a reference inside this schema (only '#...' ones "
                               "are: nothing is fetched)",
                               target));
    }
    const Json* resolved = nullptr;
    try {
      const Json::json_pointer pointer(target.substr(1));
      if (root_.contains(pointer)) resolved = &root_.at(pointer);
    } catch (const nlohmann::json::exception&) {
      refuse(path, fmt::format("'{}' is not a JSON pointer", target));
    }
    if (resolved == nullptr) refuse(path, fmt::format("'{}' names nothing in this schema", target));
    // A one-branch anyOf stands for the target, so that the target can refer back to it.
    GrammarNode wrapper;
    wrapper.kind = NodeKind::kAnyOf;
    const uint32_t node = add(std::move(wrapper));
    refs_.emplace(target, node);
    const uint32_t compiled = compile_schema(*resolved, path + "(" + target + ")", depth + 1);
    grammar_.nodes[node].branches.push_back(compiled);
    return node;
  }

  // A value that is only a choice between values that are only choices ... leading back to it
  // would make the matcher loop without reading a byte ({"$defs": {"a": {"anyOf": [{"$ref":
  // "#/$defs/a"}]}}}).
  void check_no_empty_cycles() const {
    check_cycles();
    // Longest chain of choices before a value (the matcher forks once per link).
    std::vector<int> chain(grammar_.nodes.size(), -1);
    const auto too_deep = [&] {
      refuse(field_, fmt::format("choices ($ref, anyOf, type lists) nest more than {} deep "
                                 "before a value; guided decoding takes shallower ones",
                                 kMaxChoiceDepth));
    };
    // `level`: links above on this path, so that the recursion stops at the limit.
    const std::function<int(uint32_t, int)> depth_of = [&](uint32_t node, int level) {
      if (level > kMaxChoiceDepth) too_deep();
      if (chain[node] >= 0) return chain[node];
      const GrammarNode& n = grammar_.nodes[node];
      int longest = 0;
      if (n.kind == NodeKind::kAnyOf) {
        for (const uint32_t branch : n.branches) {
          longest = std::max(longest, 1 + depth_of(branch, level + 1));
        }
      }
      chain[node] = longest;
      return longest;
    };
    for (size_t node = 0; node < grammar_.nodes.size(); ++node) {
      if (depth_of(static_cast<uint32_t>(node), 0) > kMaxChoiceDepth) too_deep();
    }
  }

  void check_cycles() const {
    const size_t count = grammar_.nodes.size();
    std::vector<uint8_t> mark(count, 0);  // 0 new, 1 on the path, 2 done
    for (size_t start = 0; start < count; ++start) {
      if (mark[start] != 0) continue;
      std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(start), 0}};
      mark[start] = 1;
      while (!path.empty()) {
        auto& [node, next] = path.back();
        const GrammarNode& n = grammar_.nodes[node];
        if (n.kind != NodeKind::kAnyOf || next == n.branches.size()) {
          mark[node] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t branch = n.branches[next++];
        if (mark[branch] == 1) {
          refuse(field_,
                 "a $ref or anyOf refers back to itself before any value is read: no "
                 "finite output matches");
        }
        if (mark[branch] == 0) {
          mark[branch] = 1;
          path.emplace_back(branch, 0);
        }
      }
    }
  }

  const Json& root_;
  std::string field_;
  Grammar grammar_;
  std::map<const Json*, uint32_t> compiled_;
  // A string's pattern and format, with its length limits folded in, as one automaton; strings
  // with the same ones share it.
  // `pattern_at`: where refusals of the pattern point (default: the schema's "pattern").
  uint32_t string_pattern(const Json& schema, const std::string& path, uint32_t min_length,
                          uint32_t max_length, const std::string& pattern_at = {}) {
    const std::string at_pattern = pattern_at.empty() ? path + ".pattern" : pattern_at;
    const auto text_of = [&](const char* keyword) -> std::optional<std::string> {
      const auto it = schema.find(keyword);
      if (it == schema.end()) return std::nullopt;
      if (!it->is_string()) refuse(path + "." + keyword, "must be a string");
      return it->get<std::string>();
    };
    const std::optional<std::string> pattern = text_of("pattern");
    const std::optional<std::string> format = text_of("format");
    if (format && format_pattern(*format).empty()) {
      refuse(path + ".format", fmt::format("guided decoding enforces the formats {}, not '{}'",
                                           known_formats(), *format));
    }
    const bool lengths = min_length > 0 || max_length != kUnbounded;
    if (lengths && (min_length > kMaxPatternLength ||
                    (max_length != kUnbounded && max_length > kMaxPatternLength))) {
      refuse(path + (min_length > kMaxPatternLength ? ".minLength" : ".maxLength"),
             fmt::format("with a pattern or format, guided decoding takes lengths up to {}",
                         kMaxPatternLength));
    }
    // The pattern last: the other parts hold no newline, so no two sets of them give one key.
    const std::string key = fmt::format("{}\n{}\n{}\n{}\n{}", format.value_or(""), min_length,
                                        max_length, pattern.has_value(), pattern.value_or(""));
    if (const auto known = patterns_.find(key); known != patterns_.end()) return known->second;

    std::optional<ByteDfa> dfa;
    const auto meet = [&](ByteDfa next, const std::string& at) {
      dfa = dfa ? intersect(*dfa, next, at) : std::move(next);
    };
    if (pattern) {
      meet(compile_regex(*pattern, RegexMatch::kSearch, true, at_pattern, budget_), at_pattern);
    }
    if (format) {
      meet(compile_regex(format_pattern(*format), RegexMatch::kWhole, true, path + ".format",
                         budget_),
           path + ".format");
    }
    if (lengths) {
      dfa = with_length(*dfa, min_length, max_length == kUnbounded ? kUnboundedRepeat : max_length,
                        path + (min_length > 0 ? ".minLength" : ".maxLength"));
    }
    pattern_cells_ += dfa->cells();
    if (pattern_cells_ > kMaxPatternCells) {
      refuse(pattern ? at_pattern : path + ".format",
             fmt::format("the schema's patterns need more than {} automaton cells in all; "
                         "guided decoding takes smaller ones",
                         kMaxPatternCells));
    }
    grammar_.patterns.push_back(std::move(*dfa));
    const auto index = static_cast<uint32_t>(grammar_.patterns.size() - 1);
    patterns_.emplace(key, index);
    return index;
  }

  std::optional<uint32_t> any_;
  std::map<std::string, uint32_t> patterns_;
  size_t pattern_cells_ = 0;
  CompileBudget budget_{2 * kMaxSubsetWork};  // all the schema's patterns together
  std::map<std::string, uint32_t> refs_;
};

}  // namespace

Grammar compile_json_schema(std::string_view schema_text, const std::string& field) {
  const Json schema = parse_json_keeping_order(schema_text);
  if (schema.is_discarded()) {
    throw ServiceError(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: not JSON, or nested deeper than {} levels", field, kMaxJsonDepth), field);
  }
  return SchemaCompiler(schema, field).compile();
}

Grammar any_json_object_grammar() {
  Grammar grammar = compile_json_schema(R"({"type": "object"})", "response_format");
  return grammar;
}

Grammar regex_grammar(std::string_view pattern, const std::string& field) {
  Grammar grammar;
  grammar.patterns.push_back(compile_regex(pattern, RegexMatch::kWhole, false, field));
  GrammarNode node;
  node.kind = NodeKind::kRegex;
  node.pattern = 0;
  grammar.nodes.push_back(std::move(node));
  grammar.raw_text = true;
  return grammar;
}

Grammar choice_grammar(std::vector<std::string> choices, const std::string& field) {
  if (choices.empty()) {
    throw ServiceError(ErrorCode::kInvalidArgument, field + ": needs at least one choice", field);
  }
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) {
      const std::string at = fmt::format("{}[{}]", field, i);
      throw ServiceError(ErrorCode::kInvalidArgument, at + ": a choice must not be empty", at);
    }
  }
  if (choices.size() > kMaxLiterals) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: has {} choices; guided decoding takes at most {}", field,
                                   choices.size(), kMaxLiterals),
                       field);
  }
  std::sort(choices.begin(), choices.end());
  choices.erase(std::unique(choices.begin(), choices.end()), choices.end());
  Grammar grammar;
  GrammarNode node;
  node.kind = NodeKind::kLiterals;
  node.literals = std::move(choices);
  grammar.nodes.push_back(std::move(node));
  grammar.raw_text = true;
  return grammar;
}

}  // namespace headway::serving::guided
