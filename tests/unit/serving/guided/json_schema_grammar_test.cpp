// JSON schemas compiled to grammars, and the byte matcher that walks them: what it lets through,
// what it refuses, and the refusals that name the part of a schema at fault.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <headway/serving/service_error.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>

#include "grammar_matcher.h"
#include "grammar_walk.h"
#include "json_schema.h"

namespace headway::serving::guided {
namespace {

Grammar schema(const std::string& text) { return compile_json_schema(text, "guided_json"); }

// Compiling `text` is refused with `param` and a message that has `words`.
void expect_refused(const std::string& text, const std::string& param, const std::string& words);

const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 4},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "email": {"type": ["string", "null"]},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1, "maxItems": 2}
  },
  "required": ["name", "tags"]
})";

TEST(JsonSchemaGrammar, DeclaredPropertiesInOrderOptionalOnesMayBeLeftOut) {
  const Grammar g = schema(kPerson);
  EXPECT_EQ(walk(g, R"({"name":"Ann","age":31,"email":null,"tags":["a"]})"), "complete");
  EXPECT_EQ(walk(g, R"({"name": "Ann", "tags": ["b", 3]})"), "complete");  // json.dumps style
  EXPECT_EQ(walk(g, R"({"name":"Ann","email":"x@y","tags":[3]})"), "complete");
  EXPECT_EQ(walk(g, R"({"name":"Ann","tags":["a"])"), "open");
  // Order, required properties, unknown keys.
  EXPECT_EQ(walk(g, R"({"age":31,"name":"Ann")"), "dead");
  EXPECT_EQ(walk(g, R"({"name":"Ann"})"), "dead");  // tags is required
  EXPECT_EQ(walk(g, R"({"tags":["a"]})"), "dead");  // so is name, before it
  EXPECT_EQ(walk(g, R"({"name":"Ann","nick")"), "dead");
  EXPECT_EQ(walk(g, R"({"name":"Ann","tags":["a"],)"), "dead");  // nothing may follow tags
  // Whitespace only as one space after ',' and ':'.
  EXPECT_EQ(walk(g, "{ \"name\""), "dead");
  EXPECT_EQ(walk(g, "{\"name\":\n"), "dead");
  EXPECT_EQ(walk(g, "{\"name\":  "), "dead");
}

TEST(JsonSchemaGrammar, StringLengthsCountCharactersAndEscapes) {
  const Grammar g = schema(kPerson);
  EXPECT_EQ(walk(g, R"({"name":"")"), "dead");  // minLength 1
  EXPECT_EQ(walk(g, R"({"name":"abcd")"), "open");
  EXPECT_EQ(walk(g, R"({"name":"abcde)"), "dead");  // maxLength 4
  // An escape and a multi-byte character are one character each.
  EXPECT_EQ(walk(g, "{\"name\":\"\\n\\u00e9\xC3\xA9\xE2\x82\xAC\","), "open");
  EXPECT_EQ(walk(g,
                 "{\"name\":\"\\n\\u00e9\xC3\xA9\xE2\x82\xAC"
                 "a"),
            "dead");
  // A surrogate pair is one character; a lone surrogate is none (strict parsers refuse it).
  EXPECT_EQ(walk(g, R"({"name":"\uD83D\uDE00abc",)"), "open");
  EXPECT_EQ(walk(g, R"({"name":"\uD83D\uDE00abcd)"), "dead");
  EXPECT_EQ(walk(g, R"({"name":"\uD83D")"), "dead");
  EXPECT_EQ(walk(g, R"({"name":"\uD83Dx)"), "dead");
  EXPECT_EQ(walk(g, R"({"name":"\uD83D\n)"), "dead");
  EXPECT_EQ(walk(g, R"({"name":"\uDE00)"), "dead");
  // Only shortest forms, no surrogates, nothing above U+10FFFF (RFC 3629).
  EXPECT_EQ(walk(g, "{\"name\":\"\xF0\x9F\x98\x80\""), "open");
  EXPECT_EQ(walk(g, "{\"name\":\"\xE0\x80"), "dead");
  EXPECT_EQ(walk(g, "{\"name\":\"\xED\xA0"), "dead");
  EXPECT_EQ(walk(g, "{\"name\":\"\xF4\x90"), "dead");
  EXPECT_EQ(walk(g, "{\"name\":\"\xF0\x8F"), "dead");
  EXPECT_EQ(walk(g, "{\"name\":\"\xED\x9F\xBF\""), "open");
  // Raw control characters, bad escapes and bytes that are not UTF-8 are refused.
  EXPECT_EQ(walk(g, "{\"name\":\"\n"), "dead");
  EXPECT_EQ(walk(g, R"({"name":"\x)"), "dead");
  EXPECT_EQ(walk(g, R"({"name":"\u12G)"), "dead");
  EXPECT_EQ(walk(g, "{\"name\":\"\xFF"), "dead");
  EXPECT_EQ(walk(g, "{\"name\":\"\xC3("), "dead");
}

TEST(JsonSchemaGrammar, NumbersFollowJsonAndIntegersHaveNoFraction) {
  const Grammar number = schema(R"({"type": "number"})");
  for (const char* ok : {"0", "-0", "12", "-3.25", "1e9", "2.5E-3", "7e+2"}) {
    EXPECT_EQ(walk(number, ok), "complete") << ok;
  }
  for (const char* bad : {"01", "+1", ".5", "1.", "1e", "--1", "1.2.3", "1e+"}) {
    EXPECT_NE(walk(number, bad), "complete") << bad;
  }
  const Grammar integer = schema(R"({"type": "integer"})");
  EXPECT_EQ(walk(integer, "-42"), "complete");
  EXPECT_EQ(walk(integer, "4.2"), "dead");
  EXPECT_EQ(walk(integer, "4e2"), "dead");
  // In an object, the byte after a number closes it.
  EXPECT_EQ(walk(schema(kPerson), R"({"name":"A","age":12,"tags":[3]})"), "complete");
}

// Integer bounds refuse a digit as soon as no value that starts so can end in range.
TEST(JsonSchemaGrammar, IntegerBoundsAreKeptDigitByDigit) {
  const Grammar g = schema(R"({"type": "integer", "minimum": 10, "maximum": 250})");
  for (const char* ok : {"10", "99", "100", "250"}) EXPECT_EQ(walk(g, ok), "complete") << ok;
  EXPECT_EQ(walk(g, "9"), "open");  // 90 to 99 still may come
  EXPECT_EQ(walk(g, "251"), "dead");
  EXPECT_EQ(walk(g, "1000"), "dead");
  EXPECT_EQ(walk(g, "0"), "dead");
  EXPECT_EQ(walk(g, "-"), "dead");
  const Grammar negative = schema(R"({"type": "integer", "minimum": -20, "maximum": -5})");
  for (const char* ok : {"-5", "-20", "-13"}) EXPECT_EQ(walk(negative, ok), "complete") << ok;
  EXPECT_EQ(walk(negative, "-1"), "open");
  for (const char* bad : {"-4", "-21", "-3", "5", "-0"}) {
    EXPECT_EQ(walk(negative, bad), "dead") << bad;
  }
  const Grammar exclusive =
      schema(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3})");
  EXPECT_EQ(walk(exclusive, "1"), "complete");
  EXPECT_EQ(walk(exclusive, "2"), "complete");
  EXPECT_EQ(walk(exclusive, "0"), "dead");
  EXPECT_EQ(walk(exclusive, "3"), "dead");
  const Grammar draft4 = schema(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})");
  EXPECT_EQ(walk(draft4, "5"), "open");  // 50 to 59 may still come
  EXPECT_EQ(walk(draft4, "6"), "complete");
  const Grammar object =
      schema(R"({"type": "object", "properties": {"age": {"type": "integer", "maximum": 150}}})");
  EXPECT_EQ(walk(object, R"({"age":151)"), "dead");
  EXPECT_EQ(walk(object, R"({"age":7})"), "complete");
  EXPECT_EQ(walk(object, R"({"age":-7})"), "complete");  // no minimum
  // A bound 64 bits cannot pass still holds the integer to 64 bits (OpenAPI's int64 bounds).
  const Grammar huge = schema(R"({"type": "integer", "maximum": 1e30})");
  EXPECT_EQ(walk(huge, "9223372036854775807"), "complete");
  EXPECT_EQ(walk(huge, "92233720368547758070"), "dead");
  const Grammar int64 = schema(
      R"({"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807})");
  EXPECT_EQ(walk(int64, "-9223372036854775808"), "complete");
  EXPECT_EQ(walk(int64, "99999999999999999999"), "dead");
  expect_refused(R"({"type": "integer", "minimum": true})", "guided_json.minimum",
                 "must be a number");
  expect_refused(R"({"type": "integer", "exclusiveMaximum": -1e30})",
                 "guided_json.exclusiveMaximum", "no integer of 64 bits is that small");
  expect_refused(R"({"type": "integer", "minimum": 1e30})", "guided_json.minimum",
                 "no integer of 64 bits");
}

TEST(JsonSchemaGrammar, NumberBoundsAreKeptDigitByDigit) {
  const Grammar unit = schema(R"({"type": "number", "minimum": 0, "maximum": 1})");
  for (const char* ok : {"0", "1", "0.5", "1.0", "1.00", "0.999", "-0"}) {
    EXPECT_EQ(walk(unit, ok), "complete") << ok;
  }
  for (const char* bad : {"1.01", "2", "-0.1", "-1", "0.5e", "1e0", "01"}) {
    EXPECT_EQ(walk(unit, bad), "dead") << bad;
  }
  EXPECT_EQ(walk(unit, "0."), "open");
  const Grammar open_ends =
      schema(R"({"type": "number", "exclusiveMinimum": 0.5, "exclusiveMaximum": 2.25})");
  EXPECT_EQ(walk(open_ends, "0.5"), "open");  // 0.51 may still come
  EXPECT_EQ(walk(open_ends, "0.50"), "open");
  EXPECT_EQ(walk(open_ends, "0.51"), "complete");
  EXPECT_EQ(walk(open_ends, "2.249"), "complete");
  EXPECT_EQ(walk(open_ends, "2.25"), "dead");  // more digits only add
  EXPECT_EQ(walk(open_ends, "0.4"), "dead");
  const Grammar negative = schema(R"({"type": "number", "minimum": -2.5, "maximum": -0.5})");
  for (const char* ok : {"-2.5", "-0.5", "-1", "-2.49"}) {
    EXPECT_EQ(walk(negative, ok), "complete") << ok;
  }
  for (const char* bad : {"-2.51", "-0.49", "0", "-3"})
    EXPECT_EQ(walk(negative, bad), "dead") << bad;
  // Bounds without a type constrain a number (other types are left out).
  const Grammar untyped = schema(R"({"minimum": 1.5})");
  EXPECT_EQ(walk(untyped, "1.5"), "complete");
  EXPECT_EQ(walk(untyped, R"("a")"), "dead");
  // minimum and exclusiveMinimum at one value: the exclusive one holds.
  const Grammar tie = schema(R"({"type": "number", "minimum": 1, "exclusiveMinimum": 1})");
  EXPECT_EQ(walk(tie, "1"), "open");
  EXPECT_EQ(walk(tie, "1.5"), "complete");
  // A bound past 2^63 on the far side says nothing more: the integer part is held below it.
  EXPECT_EQ(walk(schema(R"({"type": "number", "maximum": 1e300})"), "123.5"), "complete");
  EXPECT_EQ(walk(schema(R"({"type": "number", "minimum": -1e300})"), "-5"), "complete");
  EXPECT_EQ(walk(schema(R"({"type": "number", "maximum": 1e300})"), "9223372036854775808"), "dead");
  // The bound is the decimal its text says, not the double nearest it.
  const Grammar tenth = schema(R"({"type": "number", "maximum": 0.1})");
  EXPECT_EQ(walk(tenth, "0.1"), "complete");
  EXPECT_EQ(walk(tenth, "0.10000000000000001"), "dead");
  // At most 15 significant digits (so that doubles compare as decimals do), one more than the
  // bounds' fractions where they are longer; at the last digit the number must be in range.
  const Grammar below_tenth = schema(R"({"type": "number", "exclusiveMaximum": 0.1})");
  EXPECT_EQ(walk(below_tenth, "0.099999999999999"), "complete");
  EXPECT_EQ(walk(below_tenth, "0.0999999999999999"), "dead");  // 0.1 as a double
  EXPECT_EQ(walk(below_tenth, "-12345.6789012345"), "complete");
  EXPECT_EQ(walk(below_tenth, "-12345.67890123456"), "dead");
  const Grammar above_half = schema(R"({"type": "number", "exclusiveMinimum": 0.5})");
  EXPECT_EQ(walk(above_half, "0.50000000000000"), "open");
  EXPECT_EQ(walk(above_half, "0.500000000000000"), "dead");  // the last digit, and not above
  EXPECT_EQ(walk(above_half, "0.500000000000001"), "complete");
  const Grammar long_bound = schema(R"({"type": "number", "maximum": 0.1234567890123456})");
  EXPECT_EQ(walk(long_bound, "0.1234567890123456"), "complete");
  EXPECT_EQ(walk(long_bound, "0.12345678901234559"), "complete");
  EXPECT_EQ(walk(long_bound, "0.123456789012345599"), "dead");
  // Bounds beside another type's keywords need the type; a draft 4 boolean alone is no bound.
  expect_refused(R"({"minimum": 1, "properties": {}})", "guided_json.minimum",
                 "'minimum' beside 'properties' without a \"type\"");
  const Grammar object = schema(R"({"exclusiveMaximum": false,
      "properties": {"a": {"type": "string"}}, "required": ["a"]})");
  EXPECT_EQ(walk(object, R"({"a":"x"})"), "complete");
  expect_refused(R"({"type": "number", "minimum": 1e300})", "guided_json.minimum",
                 "no number below 2^63 in magnitude is that large");
  expect_refused(R"({"type": "number", "minimum": 2, "maximum": 1.5})", "guided_json.minimum",
                 "no number lies between the bounds");
  expect_refused(R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0})",
                 "guided_json.exclusiveMinimum", "no number lies between the bounds");
  expect_refused(R"({"type": "number", "maximum": "3"})", "guided_json.maximum",
                 "must be a number");
}

// Every number of up to five characters: complete exactly when it is a JSON number (no exponent)
// in range, and never refused on the way to one.
TEST(JsonSchemaGrammar, NumberBoundsAgreeWithArithmeticOnEveryShortNumber) {
  struct Range {
    const char* schema;
    int64_t low;  // thousandths; INT64_MIN: none
    bool low_exclusive;
    int64_t high;  // INT64_MAX: none
    bool high_exclusive;
  };
  const Range ranges[] = {
      {R"({"type": "number", "minimum": 0, "maximum": 1})", 0, false, 1000, false},
      {R"({"type": "number", "exclusiveMinimum": 0.5, "exclusiveMaximum": 2.25})", 500, true, 2250,
       true},
      {R"({"type": "number", "minimum": -2.5, "maximum": -0.5})", -2500, false, -500, false},
      {R"({"type": "number", "minimum": -1.5, "maximum": 10})", -1500, false, 10000, false},
      {R"({"type": "number", "maximum": 3.7})", INT64_MIN, false, 3700, false},
      {R"({"type": "number", "minimum": 0.25})", 250, false, INT64_MAX, false},
      {R"({"type": "number", "exclusiveMinimum": -0.5, "exclusiveMaximum": 0})", -500, true, 0,
       true},
      {R"({"type": "number", "minimum": 12.5, "maximum": 250.75})", 12500, false, 250750, false},
  };
  const std::regex json_number("-?(0|[1-9][0-9]*)(\\.[0-9]+)?");
  const auto thousandths = [](const std::string& text) {
    const bool negative = text[0] == '-';
    const std::string digits = negative ? text.substr(1) : text;
    const size_t dot = digits.find('.');
    int64_t value = std::stoll(digits.substr(0, dot)) * 1000;
    if (dot != std::string::npos) {
      std::string fraction = digits.substr(dot + 1);
      fraction.resize(3, '0');
      value += std::stoll(fraction);
    }
    return negative ? -value : value;
  };
  // All strings of 1 to 5 characters over the bytes numbers use, each with what arithmetic says
  // of it (nullopt: not a JSON number without exponent).
  const std::string alphabet = "-.0123456789";
  std::vector<std::pair<std::string, std::optional<int64_t>>> texts;
  for (size_t from = 0, length = 1; length <= 5; ++length) {
    const size_t to = texts.size();
    for (size_t parent = from; parent <= to; ++parent) {
      if (length > 1 && parent == to) break;
      const std::string base = length == 1 ? "" : texts[parent].first;
      for (const char c : alphabet) {
        const std::string text = base + c;
        std::optional<int64_t> value;
        if (std::regex_match(text, json_number)) value = thousandths(text);
        texts.emplace_back(text, value);
      }
      if (length == 1) break;
    }
    from = to;
  }
  for (const Range& r : ranges) {
    const Grammar g = schema(r.schema);
    GrammarMatcher matcher(g);
    // Each text's place from its parent's, one byte on (a dead parent: a dead child).
    std::map<std::string, MatchState> places;
    std::set<std::string> complete;
    MatchState start;
    matcher.start(start);
    places[""] = start;
    int in_range = 0;
    for (const auto& [text, value] : texts) {
      const auto parent = places.find(text.substr(0, text.size() - 1));
      MatchState next;
      const bool alive = parent != places.end() &&
                         matcher.advance(parent->second, static_cast<uint8_t>(text.back()), next);
      bool expected = value.has_value();
      if (expected) {
        if (r.low != INT64_MIN) expected = r.low_exclusive ? *value > r.low : *value >= r.low;
        if (expected && r.high != INT64_MAX) {
          expected = r.high_exclusive ? *value < r.high : *value <= r.high;
        }
      }
      ASSERT_EQ(alive && matcher.complete(next), expected) << r.schema << " on " << text;
      if (alive) places[text] = next;
      if (expected) complete.insert(text);
      if (!expected) continue;
      ++in_range;
      // Never refused on the way: every prefix is alive (kept above).
      for (size_t k = 1; k < text.size(); ++k) {
        ASSERT_TRUE(places.count(text.substr(0, k)) != 0) << r.schema << ": " << text;
      }
    }
    EXPECT_GT(in_range, 0) << r.schema;
    // Never left open where nothing can complete it: in these ranges some number of at most
    // five characters that starts so always does.
    for (const auto& [text, place] : places) {
      if (text.empty() || text.size() > 4) continue;
      const auto next = complete.lower_bound(text);
      const bool completes = next != complete.end() && next->compare(0, text.size(), text) == 0;
      EXPECT_TRUE(completes) << r.schema << ": " << text << " is open, but nothing completes it";
    }
  }
}

// multipleOf on integers: a digit is refused as soon as no multiple that starts so can end in
// range.
TEST(JsonSchemaGrammar, IntegerMultiplesAreKeptDigitByDigit) {
  const Grammar fives = schema(R"({"type": "integer", "multipleOf": 5})");
  for (const char* ok : {"0", "5", "-15", "1000", "-0"})
    EXPECT_EQ(walk(fives, ok), "complete") << ok;
  EXPECT_EQ(walk(fives, "7"), "open");  // 70, 75 may come
  EXPECT_EQ(walk(fives, "7,"), "dead");
  const Grammar bounded =
      schema(R"({"type": "integer", "multipleOf": 25, "minimum": 10, "maximum": 60})");
  for (const char* ok : {"25", "50"}) EXPECT_EQ(walk(bounded, ok), "complete") << ok;
  EXPECT_EQ(walk(bounded, "2"), "open");
  EXPECT_EQ(walk(bounded, "3"), "dead");  // 30 to 39: no multiple of 25
  EXPECT_EQ(walk(bounded, "1"), "dead");  // 10 to 19 neither
  EXPECT_EQ(walk(bounded, "-"), "dead");
  const Grammar whole_float = schema(R"({"type": "integer", "multipleOf": 3.0})");
  EXPECT_EQ(walk(whole_float, "9"), "complete");
  EXPECT_EQ(walk(whole_float, "10"), "open");  // 102 may come
  expect_refused(R"({"type": "integer", "multipleOf": 0.5})", "guided_json.multipleOf",
                 "positive whole multipleOf");
  expect_refused(R"({"type": "integer", "multipleOf": 0})", "guided_json.multipleOf",
                 "positive whole multipleOf");
  expect_refused(R"({"type": "integer", "multipleOf": 7, "minimum": 8, "maximum": 13})",
                 "guided_json.multipleOf", "no multiple of 7 lies between the bounds");
  expect_refused(R"({"type": "number", "multipleOf": 0.01})", "guided_json.multipleOf",
                 "not on numbers");
  expect_refused(R"({"multipleOf": 2})", "guided_json.multipleOf", "give the type");
}

TEST(JsonSchemaGrammar, ArraysKeepTheirItemBounds) {
  const Grammar g = schema(kPerson);
  EXPECT_EQ(walk(g, R"({"name":"A","tags":[])"), "dead");       // minItems 1
  EXPECT_EQ(walk(g, R"({"name":"A","tags":["a",3,)"), "dead");  // maxItems 2
  EXPECT_EQ(walk(g, R"({"name":"A","tags":["c"])"), "dead");    // not in the enum
  EXPECT_EQ(walk(g, R"({"name":"A","tags":[true])"), "dead");
  const Grammar free = schema(R"({"type": "array"})");
  EXPECT_EQ(walk(free, R"([1, "x", {"k": [null, false]}, []])"), "complete");
}

// Tuples: pydantic writes Tuple[int, str] as prefixItems with minItems and maxItems; drafts 4 to
// 7 wrote items as an array, with additionalItems for the rest.
TEST(JsonSchemaGrammar, TuplesTakeEachPositionsSchema) {
  const Grammar pair = schema(R"({"type": "array", "prefixItems": [{"type": "integer"},
      {"type": "string"}], "minItems": 2, "maxItems": 2})");
  EXPECT_EQ(walk(pair, R"([1, "a"])"), "complete");
  EXPECT_EQ(walk(pair, R"(["a")"), "dead");
  EXPECT_EQ(walk(pair, "[1,2"), "dead");
  EXPECT_EQ(walk(pair, "[1]"), "dead");
  EXPECT_EQ(walk(pair, R"([1,"a",)"), "dead");
  // Without items, what follows the tuple is any value; with items false, nothing.
  // Positions are counted without any minItems or maxItems to count for.
  const Grammar uncounted = schema(R"({"prefixItems": [{"type": "integer"}, {"type": "string"},
      {"type": "null"}]})");
  EXPECT_EQ(walk(uncounted, R"([1,"b",null,5])"), "complete");
  EXPECT_EQ(walk(uncounted, "[1,2"), "dead");
  EXPECT_EQ(walk(uncounted, R"([1,"b",1)"), "dead");
  const Grammar open_rest = schema(R"({"prefixItems": [{"type": "integer"}]})");
  EXPECT_EQ(walk(open_rest, R"([1,"a",true,{}])"), "complete");
  EXPECT_EQ(walk(open_rest, "[]"), "complete");
  const Grammar closed = schema(R"({"prefixItems": [{"type": "boolean"}], "items": false})");
  EXPECT_EQ(walk(closed, "[true]"), "complete");
  EXPECT_EQ(walk(closed, "[true,"), "dead");
  const Grammar typed_rest =
      schema(R"({"prefixItems": [{"type": "null"}], "items": {"type": "integer"}})");
  EXPECT_EQ(walk(typed_rest, "[null,1,2]"), "complete");
  EXPECT_EQ(walk(typed_rest, R"([null,"a")"), "dead");
  const Grammar draft7 =
      schema(R"({"items": [{"type": "null"}], "additionalItems": {"type": "integer"}})");
  EXPECT_EQ(walk(draft7, "[null,1,2]"), "complete");
  EXPECT_EQ(walk(draft7, R"([null,"a")"), "dead");
  EXPECT_EQ(walk(draft7, "[1"), "dead");
  expect_refused(R"({"prefixItems": {"type": "null"}})", "guided_json.prefixItems",
                 "must be a non-empty array of schemas");
  expect_refused(R"({"prefixItems": [{}], "items": [{}]})", "guided_json.items",
                 "beside prefixItems");
  expect_refused(R"({"type": "array", "additionalItems": false})", "guided_json.additionalItems",
                 "only beside items given as an array");
  expect_refused(R"({"prefixItems": [{}], "items": false, "minItems": 3})", "guided_json.items",
                 "minItems asks for more than 1 items");
}

TEST(JsonSchemaGrammar, AnyOfRefAndRecursionTakeEveryBranch) {
  const Grammar tree = schema(R"({
    "$defs": {"node": {"type": "object", "properties": {
      "value": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"]}},
    "$ref": "#/$defs/node"})");
  EXPECT_EQ(walk(tree, R"({"value":1,"children":[{"value":"x"},{"value":2,"children":[]}]})"),
            "complete");
  EXPECT_EQ(walk(tree, R"({"value":true)"), "dead");
  EXPECT_EQ(walk(tree, R"({"value":1,"children":[{"children":[]}]})"), "dead");
}

TEST(JsonSchemaGrammar, ObjectsWithoutPropertiesTakeAnyKeys) {
  const Grammar any = schema(R"({"type": "object"})");
  EXPECT_EQ(walk(any, R"({"k":1,"k2":{"x":[1,2]},"":"v"})"), "complete");
  EXPECT_EQ(walk(any, "{}"), "complete");
  EXPECT_EQ(walk(any, "[]"), "dead");
  const Grammar typed =
      schema(R"({"type": "object", "additionalProperties": {"type": "boolean"}})");
  EXPECT_EQ(walk(typed, R"({"a":true,"b":false})"), "complete");
  EXPECT_EQ(walk(typed, R"({"a":1)"), "dead");
  const Grammar closed = schema(R"({"type": "object", "additionalProperties": false})");
  EXPECT_EQ(walk(closed, "{}"), "complete");
  EXPECT_EQ(walk(closed, R"({")"), "dead");
}

TEST(JsonSchemaGrammar, KeysThatShareAPrefixAreTellApart) {
  const Grammar g = schema(R"({"type": "object", "properties": {
      "id": {"type": "integer"}, "idea": {"type": "string"}, "quote\"d": {"type": "null"}}})");
  EXPECT_EQ(walk(g, R"({"id":1})"), "complete");
  EXPECT_EQ(walk(g, R"({"idea":"x"})"), "complete");
  EXPECT_EQ(walk(g, R"({"id":1,"idea":"x","quote\"d":null})"), "complete");
  EXPECT_EQ(walk(g, R"({"idea":1)"), "dead");
  EXPECT_EQ(walk(g, R"({"ide")"), "dead");
  EXPECT_EQ(walk(g, R"({"idea":"x","id")"), "dead");  // declared order
}

TEST(JsonSchemaGrammar, EnumsAndConstsAreExactLiterals) {
  const Grammar g = schema(R"({"enum": [1, 12, "red", null, {"a": [1]}]})");
  for (const char* ok : {"1", "12", "\"red\"", "null", R"({"a":[1]})"}) {
    EXPECT_EQ(walk(g, ok), "complete") << ok;
  }
  EXPECT_EQ(walk(g, "123"), "dead");
  EXPECT_EQ(walk(g, "\"re\""), "dead");
  EXPECT_EQ(walk(schema(R"({"const": "on"})"), "\"on\""), "complete");
  EXPECT_EQ(walk(schema(R"({"type": "boolean"})"), "false"), "complete");
}

TEST(JsonSchemaGrammar, ChoicesAreRawTextAndMayPrefixOneAnother) {
  const Grammar g = choice_grammar({"yes", "no", "yes please"}, "guided_choice");
  EXPECT_EQ(walk(g, "yes"), "complete");  // may still go on to "yes please"
  EXPECT_EQ(walk(g, "yes please"), "complete");
  EXPECT_EQ(walk(g, "yes "), "open");
  EXPECT_EQ(walk(g, "yes!"), "dead");
  EXPECT_EQ(walk(g, "n"), "open");
  EXPECT_EQ(walk(g, "\"no\""), "dead");
}

void expect_refused(const std::string& text, const std::string& param, const std::string& words) {
  try {
    schema(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(JsonSchemaGrammar, RefusalsNameThePartOfTheSchemaAtFault) {
  expect_refused(
      R"({"type": "object", "properties": {"zip": {"type": "string", "pattern": "(a)\\1"}}})",
      "guided_json.properties.zip.pattern", "a backreference at character 3");
  expect_refused(R"({"type": "string", "pattern": 5})", "guided_json.pattern", "must be a string");
  expect_refused(R"({"type": "string", "pattern": "^a\"$"})", "guided_json.pattern",
                 "matches no string that a JSON string holds without escapes");
  expect_refused(R"({"type": "string", "pattern": "^[0-9]{3}$", "maxLength": 2})",
                 "guided_json.maxLength", "matches no string within the length limits");
  expect_refused(R"({"type": "string", "pattern": "a", "maxLength": 5000})",
                 "guided_json.maxLength", "lengths up to 4096");
  expect_refused(R"({"type": "integer", "minimum": 5, "maximum": 4.5})", "guided_json.minimum",
                 "no integer lies between");
  expect_refused(R"({"type": "array", "uniqueItems": true})", "guided_json.uniqueItems",
                 "items are enum, const or boolean values");
  expect_refused(R"({"type": "object", "minProperties": 3, "maxProperties": 2})",
                 "guided_json.minProperties", "above maxProperties");
  expect_refused(R"({"type": "object", "properties": {"a": {}}, "minProperties": 2})",
                 "guided_json.minProperties", "writes only the 1 the schema declares");
  expect_refused(R"({"properties": {"a": {}, "b": {}}, "required": ["a", "b"],
                     "maxProperties": 1})",
                 "guided_json.maxProperties", "fewer than the 2 required");
  expect_refused(R"({"type": "object", "maxProperties": -1})", "guided_json.maxProperties",
                 "non-negative integer");
  expect_refused(R"({"type": "string", "format": "iri-reference"})", "guided_json.format",
                 "enforces the formats date, time");
  expect_refused(R"({"type": "strng"})", "guided_json.type", "unknown type 'strng'");
  expect_refused(R"({"type": "array", "minItems": 3, "maxItems": 2})", "guided_json.minItems",
                 "above maxItems");
  expect_refused(R"({"type": "string", "maxLength": -1})", "guided_json.maxLength",
                 "non-negative integer");
  expect_refused(R"({"$ref": "#/$defs/missing"})", "guided_json.$ref", "names nothing");
  expect_refused(R"({"$ref": "https://example.com/s.json"})", "guided_json.$ref",
                 "nothing is fetched");
  expect_refused(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})",
                 "guided_json", "refers back to itself");
  expect_refused("false", "guided_json", "matches nothing");
  expect_refused("[1]", "guided_json", "object or a boolean");
  expect_refused("{\"type\": ", "guided_json", "not JSON");
  expect_refused(R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})", "guided_json.allOf",
                 "exactly one schema");
}

TEST(JsonSchemaGrammar, KeywordsBesideAChoiceAreRefusedNotDropped) {
  expect_refused(R"({"type": "object", "properties": {"a": {}}, "anyOf": [{"required": ["a"]}]})",
                 "guided_json.type", "cannot be combined with 'anyOf'");
  expect_refused(R"({"$ref": "#/$defs/a", "maxLength": 3, "$defs": {"a": {"type": "string"}}})",
                 "guided_json.maxLength", "cannot be combined with '$ref'");
  // What pydantic writes for enums and literals is taken.
  EXPECT_EQ(walk(schema(R"({"enum": ["a", "b"], "type": "string", "title": "E"})"), "\"b\""),
            "complete");
  EXPECT_EQ(walk(schema(R"({"const": "a", "enum": ["a"], "type": "string"})"), "\"a\""),
            "complete");
}

// Hostile schemas cost bounded work: each schema object compiles once (a list of types does not
// double the grammar per level), and choices, literals and properties have limits.
TEST(JsonSchemaGrammar, SchemasCannotGrowWithoutBound) {
  std::string nested = R"({"type": "integer"})";
  for (int level = 0; level < 40; ++level) {
    nested = R"({"type": ["object", "object", "null"], "properties": {"p": )" + nested + "}}";
  }
  const Grammar g = schema(nested);
  EXPECT_LT(g.nodes.size(), 200u);
  std::string text;
  for (int level = 0; level < 40; ++level) text += R"({"p":)";
  text += "7";
  for (int level = 0; level < 40; ++level) text += "}";
  EXPECT_EQ(walk(g, text), "complete");

  std::string defs;
  for (int i = 0; i < 70; ++i) {
    defs +=
        "\"d" + std::to_string(i) + R"(": {"$ref": "#/$defs/d)" + std::to_string(i + 1) + "\"}, ";
  }
  expect_refused(R"({"$ref": "#/$defs/d0", "$defs": {)" + defs + R"("d70": {"type": "null"}}})",
                 "guided_json", "nest more than 64 deep");

  std::vector<std::string> many;
  for (int i = 0; i < 10000; ++i) many.push_back("choice " + std::to_string(i));
  const Grammar choices = choice_grammar(many, "guided_choice");
  EXPECT_EQ(walk(choices, "choice 9999"), "complete");
  EXPECT_EQ(walk(choices, "choice 99999"), "dead");
  many.resize(20000, "x");
  for (int i = 10000; i < 20000; ++i) many[i] = "other " + std::to_string(i);
  EXPECT_THROW(choice_grammar(many, "guided_choice"), ServiceError);
}

TEST(JsonSchemaGrammar, AnnotationsChangeNothing) {
  const Grammar g = schema(R"({"title": "T", "description": "d", "$schema": "x",
      "type": "object", "properties": {"a": {"type": "integer", "default": 3, "examples": [1]}},
      "required": ["a"]})");
  EXPECT_EQ(walk(g, R"({"a":3})"), "complete");
  // uniqueItems false asks for nothing, wherever it is; true asks nothing of a value that is not
  // an array.
  const Grammar list = schema(R"({"type": "array", "items": {"type": "integer"},
      "uniqueItems": false})");
  EXPECT_EQ(walk(list, "[1,1]"), "complete");
  EXPECT_EQ(walk(schema(R"({"$ref": "#/$defs/C", "uniqueItems": false, "$defs": {"C":
      {"enum": ["a"]}}})"),
                 R"("a")"),
            "complete");
  EXPECT_EQ(walk(schema(R"({"enum": ["a", "b"], "uniqueItems": false})"), R"("b")"), "complete");
  EXPECT_EQ(walk(schema(R"({"minimum": 0, "uniqueItems": false})"), "3"), "complete");
  EXPECT_EQ(walk(schema(R"({"type": "string", "uniqueItems": true})"), R"("x")"), "complete");
}

// Random walks through the grammar (each step one of the bytes it allows, chosen at random)
// always give JSON that parses and has what the schema requires.
// A random output of `matcher`'s grammar in plain ASCII (which keeps strings short enough to
// finish; multi-byte walks are tested above), or "" when the walk ran past 400 bytes. Fails the
// test if a walk gets stuck: the matcher must refuse a byte as soon as no output can follow it.
std::string random_output(const GrammarMatcher& matcher, std::mt19937& random) {
  MatchState state;
  MatchState next;
  matcher.start(state);
  std::string text;
  while (text.size() < 400) {
    if (matcher.complete(state) && random() % 4 == 0) break;
    std::vector<uint8_t> allowed;
    for (int byte = 0x20; byte < 0x80; ++byte) {
      if (matcher.advance(state, static_cast<uint8_t>(byte), next)) allowed.push_back(byte);
    }
    if (allowed.empty() && matcher.complete(state)) break;  // nothing may follow
    if (allowed.empty()) {
      ADD_FAILURE() << "stuck after " << text;
      return "";
    }
    // Favour closing bytes so that walks end.
    uint8_t byte = allowed[random() % allowed.size()];
    for (const uint8_t closing : {'"', ']', '}'}) {
      if (random() % 3 == 0 &&
          std::find(allowed.begin(), allowed.end(), closing) != allowed.end()) {
        byte = closing;
      }
    }
    matcher.advance(state, byte, next);
    std::swap(state, next);
    text.push_back(static_cast<char>(byte));
  }
  return matcher.complete(state) ? text : "";
}

// The outputs of `walks` random walks through `grammar` (random_output) that ended, parsed; fails
// the test when fewer than `at_least` ended or one is not JSON.
std::vector<nlohmann::json> random_values(const Grammar& grammar, unsigned seed, int walks,
                                          int at_least) {
  GrammarMatcher matcher(grammar);
  std::mt19937 random(seed);
  std::vector<nlohmann::json> values;
  for (int i = 0; i < walks; ++i) {
    const std::string text = random_output(matcher, random);
    if (text.empty()) continue;
    values.push_back(nlohmann::json::parse(text, nullptr, false));
    if (values.back().is_discarded()) ADD_FAILURE() << "not JSON: " << text;
  }
  EXPECT_GE(values.size(), static_cast<size_t>(at_least));
  return values;
}

TEST(JsonSchemaGrammar, RandomWalksGiveJsonTheSchemaAccepts) {
  const Grammar g = schema(kPerson);
  for (const nlohmann::json& value : random_values(g, 7, 300, 101)) {
    ASSERT_TRUE(value.is_object()) << value.dump();
    ASSERT_TRUE(value.contains("name") && value["name"].is_string()) << value.dump();
    EXPECT_GE(value["name"].get<std::string>().size(), 1u) << value.dump();
    ASSERT_TRUE(value.contains("tags") && value["tags"].is_array()) << value.dump();
    EXPECT_GE(value["tags"].size(), 1u) << value.dump();
    EXPECT_LE(value["tags"].size(), 2u) << value.dump();
    if (value.contains("age")) {
      // Past 64 bits nlohmann reads an integer as a double: still without a fraction.
      ASSERT_TRUE(value["age"].is_number()) << value.dump();
      const double age = value["age"].get<double>();
      EXPECT_EQ(std::floor(age), age) << value.dump();
      EXPECT_GE(age, 0.0) << value.dump();
      EXPECT_LE(age, 120.0) << value.dump();
    }
  }
}

// minProperties and maxProperties over declared properties: every choice of properties (in
// order) is taken exactly when it has the required ones and a count within the limits, so no
// answer is left unable to finish and none outside them gets through.
TEST(JsonSchemaGrammar, PropertyCountsTakeExactlyTheObjectsWithinThem) {
  const char* kProperties = R"("properties": {"p0": {"type": "integer"},
      "p1": {"type": "integer"}, "p2": {"type": "integer"}, "p3": {"type": "integer"},
      "p4": {"type": "integer"}}, "required": ["p1", "p3"])";
  for (uint32_t min = 0; min <= 5; ++min) {
    for (uint32_t max = std::max(min, 2u); max <= 6; ++max) {
      const Grammar g = schema(fmt::format(R"({{"type": "object", {}, "minProperties": {},
          "maxProperties": {}}})",
                                           kProperties, min, max));
      for (uint32_t subset = 0; subset < 32; ++subset) {
        std::string text = "{";
        uint32_t count = 0;
        for (uint32_t i = 0; i < 5; ++i) {
          if ((subset & (1u << i)) == 0) continue;
          text += fmt::format("{}\"p{}\":{}", count++ == 0 ? "" : ",", i, i);
        }
        text += "}";
        const bool required = (subset & 0b01010) == 0b01010;
        const bool fits = required && count >= min && count <= max;
        EXPECT_EQ(walk(g, text), fits ? "complete" : "dead")
            << text << " with minProperties " << min << ", maxProperties " << max;
      }
    }
  }
  // Random walks never get stuck where the limits leave one way on.
  const Grammar g = schema(fmt::format(
      R"({{"type": "object", {}, "minProperties": 3, "maxProperties": 3}})", kProperties));
  for (const nlohmann::json& value : random_values(g, 11, 200, 101)) {
    ASSERT_TRUE(value.is_object()) << value.dump();
    EXPECT_EQ(value.size(), 3u) << value.dump();
    EXPECT_TRUE(value.contains("p1") && value.contains("p3")) << value.dump();
  }
}

// Free keys: maxProperties holds; minProperties up to 1 (a repeated free key could make up a
// larger count, so above 1 it needs declared properties).
TEST(JsonSchemaGrammar, PropertyCountsOnFreeKeys) {
  const Grammar most_two = schema(R"({"type": "object", "maxProperties": 2})");
  EXPECT_EQ(walk(most_two, "{}"), "complete");
  EXPECT_EQ(walk(most_two, R"({"a":1,"b":{"c":[2]}})"), "complete");
  EXPECT_EQ(walk(most_two, R"({"a":1,"b":2,)"), "dead");
  const Grammar at_least_one =
      schema(R"({"minProperties": 1, "additionalProperties": {"type": "string"}})");
  EXPECT_EQ(walk(at_least_one, "{}"), "dead");
  EXPECT_EQ(walk(at_least_one, R"({"k":"v"})"), "complete");
  EXPECT_EQ(walk(at_least_one, R"({"k":1)"), "dead");
  expect_refused(R"({"type": "object", "minProperties": 2})", "guided_json.minProperties",
                 "declare them in properties");
  // Required names count with the declared ones against the limit on properties.
  std::string many = R"({"type": "object", "required": [)";
  for (int i = 0; i <= 1024; ++i) many += fmt::format("{}\"k{}\"", i == 0 ? "" : ",", i);
  expect_refused(many + "]}", "guided_json.required", "names 1025 properties");
  // Limits every object meets count nothing: the places are those of the schema without them.
  const char* kTwo = R"("properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "required": ["a"])";
  const Grammar plain = schema(fmt::format(R"({{"type": "object", {}}})", kTwo));
  const Grammar loose = schema(
      fmt::format(R"({{"type": "object", {}, "minProperties": 1, "maxProperties": 2}})", kTwo));
  GrammarMatcher plain_matcher(plain);
  GrammarMatcher loose_matcher(loose);
  MatchState plain_state;
  MatchState loose_state;
  MatchState next;
  plain_matcher.start(plain_state);
  loose_matcher.start(loose_state);
  for (const char byte : std::string(R"({"a":1,"b")")) {
    ASSERT_TRUE(plain_matcher.advance(plain_state, static_cast<uint8_t>(byte), next));
    std::swap(plain_state, next);
    ASSERT_TRUE(loose_matcher.advance(loose_state, static_cast<uint8_t>(byte), next));
    std::swap(loose_state, next);
    EXPECT_EQ(plain_state.frames, loose_state.frames) << "at " << byte;
  }
  // A nested object's count is its own.
  const Grammar nested = schema(R"({"type": "object", "properties": {"a": {"type": "object",
      "maxProperties": 1}, "b": {"type": "null"}}, "minProperties": 2})");
  EXPECT_EQ(walk(nested, R"({"a":{"x":1},"b":null})"), "complete");
  EXPECT_EQ(walk(nested, R"({"a":{"x":1,)"), "dead");
  EXPECT_EQ(walk(nested, R"({"a":{}})"), "dead");
}

// uniqueItems on items that are enum values (pydantic's set[SomeEnum]): a value is refused at
// its first byte that no value not yet written shares, and the array ends once all are written.
TEST(JsonSchemaGrammar, UniqueItemsOfEnumValuesAreEachWrittenOnce) {
  const Grammar colours = schema(R"({"type": "array", "items": {"$ref": "#/$defs/Colour"},
      "uniqueItems": true, "$defs": {"Colour": {"enum": ["red", "green", "blue"],
      "type": "string"}}})");
  EXPECT_EQ(walk(colours, R"(["red", "blue"])"), "complete");
  EXPECT_EQ(walk(colours, R"(["blue","green","red"])"), "complete");
  EXPECT_EQ(walk(colours, "[]"), "complete");
  EXPECT_EQ(walk(colours, R"(["red","r)"), "dead");               // no value left begins so
  EXPECT_EQ(walk(colours, R"(["red","green","blue",)"), "dead");  // none left at all
  // Values that begin alike: each is refused only where it parts from those not written.
  const Grammar numbers = schema(R"({"type": "array", "items": {"enum": [1, 12, "a", "ab"]},
      "uniqueItems": true, "minItems": 2})");
  EXPECT_EQ(walk(numbers, "[12,1]"), "complete");
  EXPECT_EQ(walk(numbers, "[1,12]"), "complete");
  EXPECT_EQ(walk(numbers, "[1,1]"), "dead");
  EXPECT_EQ(walk(numbers, "[12,12"), "dead");
  EXPECT_EQ(walk(numbers, R"(["a","ab","a")"), "dead");
  EXPECT_EQ(walk(numbers, R"(["ab","a"])"), "complete");
  EXPECT_EQ(walk(numbers, "[1]"), "dead");  // minItems
  const Grammar flags = schema(R"({"items": {"type": "boolean"}, "uniqueItems": true})");
  EXPECT_EQ(walk(flags, "[true,false]"), "complete");
  EXPECT_EQ(walk(flags, "[true,t"), "dead");
  // Arrays apart keep apart: each has its own written values.
  const Grammar nested = schema(R"({"type": "array", "items": {"type": "array",
      "items": {"enum": ["x", "y"]}, "uniqueItems": true}})");
  EXPECT_EQ(walk(nested, R"([["x","y"],["x"],["y","x"]])"), "complete");
  EXPECT_EQ(walk(nested, R"([["x"],["y","y")"), "dead");

  // Random walks are never stuck and never repeat a value.
  for (const nlohmann::json& value : random_values(numbers, 5, 200, 101)) {
    ASSERT_TRUE(value.is_array()) << value.dump();
    EXPECT_GE(value.size(), 2u) << value.dump();
    std::set<std::string> seen;
    for (const auto& item : value) EXPECT_TRUE(seen.insert(item.dump()).second) << value.dump();
  }

  expect_refused(R"({"type": "array", "items": {"enum": [1, 1.0]}, "uniqueItems": true})",
                 "guided_json.uniqueItems", "1 and 1.0 are equal as JSON");
  expect_refused(R"({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true,
                     "minItems": 3})",
                 "guided_json.minItems", "only 2 values");
  expect_refused(R"({"type": "array", "prefixItems": [{"const": 1}], "items": {"const": 2},
                     "uniqueItems": true})",
                 "guided_json.uniqueItems", "without a tuple");
  expect_refused(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})",
                 "guided_json.uniqueItems", "enum, const or boolean");
  // Where at most one item may come there is nothing to repeat: any items are taken.
  EXPECT_EQ(walk(schema(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true,
      "maxItems": 1})"),
                 R"(["x"])"),
            "complete");
  expect_refused(R"({"type": "array", "uniqueItems": "yes"})", "guided_json.uniqueItems",
                 "must be a boolean");
  expect_refused(R"({"type": "string", "uniqueItems": 1})", "guided_json.uniqueItems",
                 "must be a boolean");
  // Beside a choice it would be dropped: refused, as any constraint there.
  expect_refused(R"({"$ref": "#/$defs/L", "uniqueItems": true, "$defs": {"L": {"type": "array",
                     "items": {"enum": [1, 2]}}}})",
                 "guided_json.uniqueItems", "cannot be combined with '$ref'");
  expect_refused(R"({"minimum": 0, "uniqueItems": true})", "guided_json.minimum",
                 "beside 'uniqueItems' without a \"type\"");
  std::string many = R"({"type": "array", "uniqueItems": true, "items": {"enum": [)";
  for (int i = 0; i <= 32; ++i) many += fmt::format("{}{}", i == 0 ? "" : ",", i);
  expect_refused(many + "]}}", "guided_json.uniqueItems", "at most 32 values");
}

// propertyNames on free keys (pydantic's dict[SomeEnum, float] and dict[Literal[...], int]):
// each key is a value of its schema, refused at its first byte that none begins with.
TEST(JsonSchemaGrammar, PropertyNamesShapeFreeKeys) {
  const Grammar scores = schema(R"({"type": "object", "additionalProperties": {"type": "number",
      "minimum": 0, "maximum": 20},
      "propertyNames": {"$ref": "#/$defs/Subject"}, "$defs": {"Subject": {"enum": ["maths",
      "music"], "type": "string"}}})");
  EXPECT_EQ(walk(scores, R"({"maths": 1.5, "music":2})"), "complete");
  EXPECT_EQ(walk(scores, "{}"), "complete");
  EXPECT_EQ(walk(scores, R"({"mat)"), "open");
  EXPECT_EQ(walk(scores, R"({"mad)"), "dead");
  EXPECT_EQ(walk(scores, R"({"art")"), "dead");
  const Grammar codes = schema(R"({"additionalProperties": {"type": "integer"},
      "propertyNames": {"pattern": "^[A-Z]{2}$"}, "maxProperties": 2})");
  EXPECT_EQ(walk(codes, R"({"FR":1,"DE":2})"), "complete");
  EXPECT_EQ(walk(codes, R"({"Fr")"), "dead");
  EXPECT_EQ(walk(codes, R"({"FRA")"), "dead");
  EXPECT_EQ(walk(codes, R"({"FR":1,"DE":2,)"), "dead");
  const Grammar short_keys = schema(R"({"type": "object", "propertyNames": {"maxLength": 2}})");
  EXPECT_EQ(walk(short_keys, R"({"ab":[1],"":null})"), "complete");
  EXPECT_EQ(walk(short_keys, R"({"abc")"), "dead");
  // false takes no key; {} any.
  const Grammar none = schema(R"({"type": "object", "propertyNames": false})");
  EXPECT_EQ(walk(none, "{}"), "complete");
  EXPECT_EQ(walk(none, R"({")"), "dead");
  expect_refused(R"({"type": "object", "propertyNames": false, "minProperties": 1})",
                 "guided_json.minProperties", "above maxProperties");
  EXPECT_EQ(walk(schema(R"({"type": "object", "propertyNames": {}})"), R"({"k":1})"), "complete");
  // Choices that share their branches are looked through once each: 8 branches over 10 levels
  // (8^10 paths) compile at once.
  std::string levels = R"({"type": "object", "propertyNames": {"$ref": "#/$defs/L0"}, "$defs": {)";
  for (int level = 0; level < 10; ++level) {
    levels += fmt::format(R"("L{}": {{"anyOf": [)", level);
    for (int branch = 0; branch < 8; ++branch) {
      levels += fmt::format(R"({}{{"$ref": "#/$defs/L{}"}})", branch == 0 ? "" : ",", level + 1);
    }
    levels += "]},";
  }
  levels += R"("L10": {"type": "string", "maxLength": 3}}})";
  EXPECT_EQ(walk(schema(levels), R"({"abc":1})"), "complete");
  // true, and on an object that takes no key, it asks for nothing.
  EXPECT_EQ(walk(schema(R"({"type": "object", "propertyNames": true})"), R"({"k":1})"), "complete");
  EXPECT_EQ(walk(schema(R"({"type": "object", "additionalProperties": false,
      "propertyNames": {"enum": ["a"]}})"),
                 "{}"),
            "complete");

  // Random walks give keys of the schema only.
  for (const nlohmann::json& value : random_values(scores, 3, 200, 101)) {
    ASSERT_TRUE(value.is_object()) << value.dump();
    for (const auto& [key, number] : value.items()) {
      EXPECT_TRUE(key == "maths" || key == "music") << value.dump();
      EXPECT_TRUE(number.is_number()) << value.dump();
    }
  }

  expect_refused(R"({"type": "object", "propertyNames": {"type": "integer"}})",
                 "guided_json.propertyNames", "must describe strings");
  expect_refused(R"({"type": "object", "propertyNames": {"enum": ["a", 1]}})",
                 "guided_json.propertyNames", "must describe strings");
  expect_refused(R"({"type": "object", "properties": {"a": {}}, "propertyNames": {"enum": ["a"]}})",
                 "guided_json.propertyNames", "without declared properties");
  expect_refused(R"({"type": "object", "propertyNames": {"pattern": "("}})",
                 "guided_json.propertyNames.pattern", "");
}

// patternProperties of one pattern (pydantic's dict[constr(pattern=...), int]): keys the pattern
// matches, values of its schema; other keys are not written, as undeclared ones are not.
TEST(JsonSchemaGrammar, PatternPropertiesShapeKeysAndValues) {
  const Grammar codes =
      schema(R"({"patternProperties": {"^[A-Z]{2}$": {"type": "integer"}}, "type": "object"})");
  EXPECT_EQ(walk(codes, R"({"FR": 1, "DE": 2})"), "complete");
  EXPECT_EQ(walk(codes, "{}"), "complete");
  EXPECT_EQ(walk(codes, R"({"Fr)"), "dead");
  EXPECT_EQ(walk(codes, R"({"FR":"x)"), "dead");
  // Searched, as "pattern" is: unanchored, the key holds a digit somewhere.
  const Grammar digit = schema(R"({"type": "object", "patternProperties": {"[0-9]": {}},
      "additionalProperties": false, "maxProperties": 1})");
  EXPECT_EQ(walk(digit, R"({"a1b":null})"), "complete");
  EXPECT_EQ(walk(digit, R"({"ab")"), "dead");
  EXPECT_EQ(walk(digit, R"({"1":1,)"), "dead");
  expect_refused(R"({"type": "object", "patternProperties": {"a": {}, "b": {}}})",
                 "guided_json.patternProperties", "takes one");
  expect_refused(R"({"type": "object", "properties": {"a": {}}, "patternProperties": {"a": {}}})",
                 "guided_json.patternProperties", "without declared properties");
  expect_refused(R"({"type": "object", "patternProperties": {"a": {}}, "propertyNames":
                     {"maxLength": 3}})",
                 "guided_json.patternProperties", "cannot be combined with propertyNames");
  expect_refused(R"({"type": "object", "patternProperties": {"(a)\\1": {}}})",
                 "guided_json.patternProperties.(a)\\1", "backreference");
  expect_refused(R"({"type": "object", "patternProperties": {"a": {"type": "strng"}}})",
                 "guided_json.patternProperties.a.type", "unknown type");
}

// What pydantic 2.13 writes for sets and dicts (model_json_schema() of a model with set[Tag],
// dict[Tag, float], dict[Literal["x", "y"], int], dict[constr(pattern=...), int] and
// dict[str, int] with min and max lengths).
TEST(JsonSchemaGrammar, PydanticSetsAndDictsAreTaken) {
  const Grammar g = schema(R"({"$defs": {"Tag": {"enum": ["a", "b"], "title": "Tag",
      "type": "string"}}, "properties": {"tags": {"items": {"$ref": "#/$defs/Tag"},
      "title": "Tags", "type": "array", "uniqueItems": true}, "scores": {"additionalProperties":
      {"type": "number"}, "propertyNames": {"$ref": "#/$defs/Tag"}, "title": "Scores",
      "type": "object"}, "lit": {"additionalProperties": {"type": "integer"}, "propertyNames":
      {"enum": ["x", "y"]}, "title": "Lit", "type": "object"}, "pat": {"patternProperties":
      {"^[A-Z]{2}$": {"type": "integer"}}, "title": "Pat", "type": "object"}, "d":
      {"additionalProperties": {"type": "integer"}, "maxProperties": 3, "minProperties": 1,
      "title": "D", "type": "object"}}, "required": ["tags", "scores", "lit", "pat", "d"],
      "title": "M", "type": "object"})");
  EXPECT_EQ(walk(g, R"({"tags": ["b", "a"], "scores": {"a": 0.5}, "lit": {"y": 2}, )"
                    R"("pat": {"FR": 3}, "d": {"k": 1}})"),
            "complete");
  EXPECT_EQ(walk(g, R"({"tags": ["b", "b")"), "dead");
  EXPECT_EQ(walk(g, R"({"tags": [], "scores": {"c")"), "dead");
  EXPECT_EQ(walk(g, R"({"tags": [], "scores": {}, "lit": {"z")"), "dead");
  EXPECT_EQ(walk(g, R"({"tags": [], "scores": {}, "lit": {}, "pat": {"F1")"), "dead");
  EXPECT_EQ(walk(g, R"({"tags": [], "scores": {}, "lit": {}, "pat": {}, "d": {}})"), "dead");
  EXPECT_EQ(walk(g, R"({"tags": [], "scores": {}, "lit": {}, "pat": {}, "d": {"a":1,"b":2,"c":3,)"),
            "dead");
}

// "pattern" (searched, as JSON Schema says, unless anchored) and "format" shape a string's
// characters; lengths still hold beside them.
TEST(JsonSchemaGrammar, PatternsAndFormatsShapeStrings) {
  const Grammar g = schema(R"({"type": "object", "properties": {
      "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
      "code": {"type": "string", "pattern": "[A-Z]", "minLength": 2, "maxLength": 3},
      "day": {"type": "string", "format": "date"},
      "id": {"format": "uuid"}}})");
  EXPECT_EQ(walk(g, R"({"zip": "12345"})"), "complete");
  EXPECT_EQ(walk(g, R"({"zip": "1234a)"), "dead");
  EXPECT_EQ(walk(g, R"({"zip": "1234")"), "dead");
  EXPECT_EQ(walk(g, R"({"zip": "123456)"), "dead");
  EXPECT_EQ(walk(g, R"({"code": "aBc"})"), "complete");
  EXPECT_EQ(walk(g, R"({"code": "Ab"})"), "complete");
  EXPECT_EQ(walk(g, R"({"code": "abc)"), "dead");  // no capital is left room for
  EXPECT_EQ(walk(g, R"({"code": "A")"), "dead");   // one character of at least two
  EXPECT_EQ(walk(g, R"({"code": "A
)"),
            "dead");  // no escapes under a pattern
  EXPECT_EQ(walk(g, R"({"day": "2026-12-03"})"), "complete");
  EXPECT_EQ(walk(g, R"({"day": "2026-13)"), "dead");
  EXPECT_EQ(walk(g, R"({"day": "2026-02-32)"), "dead");
  EXPECT_EQ(walk(g, R"({"id": "123e4567-e89b-12d3-a456-426614174000"})"), "complete");
  EXPECT_EQ(walk(g, R"({"id": "123e4567e)"), "dead");
  // A pattern and a format together: the strings both accept.
  const Grammar dated = schema(R"({"type": "string", "format": "date", "pattern": "^2026-"})");
  EXPECT_EQ(walk(dated, R"("2026-12-03")"), "complete");
  EXPECT_EQ(walk(dated, R"("2025)"), "dead");
  EXPECT_EQ(walk(dated, R"("2026-13)"), "dead");
  // pydantic's HttpUrl: a uri of 1 to 2,083 characters.
  const Grammar url = schema(R"({"type": "string", "format": "uri", "minLength": 1,
                                 "maxLength": 2083})");
  EXPECT_EQ(walk(url, R"("https://example.com/a?b=%41#c")"), "complete");
  EXPECT_EQ(walk(url, R"("9)"), "dead");  // a scheme starts with a letter
  EXPECT_EQ(walk(url, R"("https://a b)"), "dead");
  EXPECT_EQ(walk(url, "\"https://x/" + std::string(2073, 'a') + "\""), "complete");  // 2,083
  EXPECT_EQ(walk(url, "\"https://x/" + std::string(2074, 'a')), "dead");
  // The same pattern twice is one automaton.
  const Grammar twice = schema(R"({"type": "array", "items": {"anyOf": [
      {"type": "string", "pattern": "^a+$"}, {"type": "string", "pattern": "^a+$"}]}})");
  EXPECT_EQ(twice.patterns.size(), 1u);
}

// Random outputs of formats are what their standards allow, checked field by field.
TEST(JsonSchemaGrammar, RandomWalksGiveFormatsTheirStandardsAccept) {
  const Grammar g = schema(R"({"type": "object", "properties": {
      "day": {"type": "string", "format": "date"},
      "ip": {"type": "string", "format": "ipv4"},
      "id": {"type": "string", "format": "uuid"},
      "sku": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$", "maxLength": 6}},
      "required": ["day", "ip", "id", "sku"]})");
  for (const nlohmann::json& value : random_values(g, 5, 200, 51)) {
    ASSERT_TRUE(value.is_object()) << value.dump();
    int year = 0;
    int month = 0;
    int day = 0;
    ASSERT_EQ(
        std::sscanf(value["day"].get<std::string>().c_str(), "%4d-%2d-%2d", &year, &month, &day), 3)
        << value.dump();
    EXPECT_TRUE(month >= 1 && month <= 12 && day >= 1 && day <= 31) << value.dump();
    const std::string ip = value["ip"].get<std::string>();
    int octets[4] = {};
    ASSERT_EQ(
        std::sscanf(ip.c_str(), "%d.%d.%d.%d", &octets[0], &octets[1], &octets[2], &octets[3]), 4)
        << value.dump();
    for (const int octet : octets) EXPECT_TRUE(octet >= 0 && octet <= 255) << value.dump();
    // No leading zeros (RFC 3986's dec-octet): "01" would read as octal to some parsers.
    for (size_t at = 0; at < ip.size(); at = ip.find('.', at) + 1) {
      const size_t end = std::min(ip.find('.', at), ip.size());
      EXPECT_TRUE(end - at == 1 || ip[at] != '0') << value.dump();
      if (end == ip.size()) break;
    }
    const std::string id = value["id"].get<std::string>();
    ASSERT_EQ(id.size(), 36u) << value.dump();
    for (size_t k = 0; k < id.size(); ++k) {
      if (k == 8 || k == 13 || k == 18 || k == 23) {
        EXPECT_EQ(id[k], '-') << value.dump();
      } else {
        EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(id[k]))) << value.dump();
      }
    }
    const std::string sku = value["sku"].get<std::string>();
    EXPECT_TRUE(std::regex_match(sku, std::regex("[A-Z]{2}-[0-9]+"))) << value.dump();
    EXPECT_LE(sku.size(), 6u) << value.dump();
  }
}

}  // namespace
}  // namespace headway::serving::guided
