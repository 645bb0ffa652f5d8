// json_text.h: the nesting scan and the order-keeping parse (key order, repeated keys, values of
// every kind, refusals), including shapes that made nlohmann's own ordered parse slow.
#include "headway/serving/json_text.h"

#include <gtest/gtest.h>

#include <string>

namespace headway::serving {
namespace {

using Json = nlohmann::ordered_json;

TEST(JsonText, NestingIsCountedOutsideStrings) {
  EXPECT_FALSE(json_nests_deeper_than(R"({"a": [1, {"b": []}]})", 4));
  EXPECT_TRUE(json_nests_deeper_than(R"({"a": [1, {"b": []}]})", 3));
  EXPECT_FALSE(json_nests_deeper_than(R"(["[[[[", "\"[[[["])", 1));
}

TEST(JsonText, AContainerEndsAtItsOwnClosingBracket) {
  const std::string text = R"(x {"a": "}", "b": [1, {"c": "\"]"}]}; {"d": 2})";
  const size_t end = json_container_end(text, 2);
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(text.substr(end), "; {\"d\": 2}");
  EXPECT_EQ(json_container_end(text, text.find("{\"d")), text.size());
  EXPECT_EQ(json_container_end(R"({"a": [1, 2})", 0), std::string::npos);  // never closed
}

TEST(JsonText, KeysKeepTheirWrittenOrder) {
  const Json parsed = parse_json_keeping_order(
      R"({"type": "function", "function": {"name": "f", "b": 1, "a": 2}})");
  ASSERT_TRUE(parsed.is_object());
  EXPECT_EQ(parsed.dump(), R"({"type":"function","function":{"name":"f","b":1,"a":2}})");
  // What nlohmann's ordered parse gives, so the two can stand in for each other.
  const std::string text =
      R"([{"z": null, "y": true, "x": -3, "w": 18446744073709551615, "v": 1.5e3, "u": "\u00e9\n"},)"
      R"( [], {}, [[{"k": [1, 2, {"j": false}]}]]])";
  EXPECT_EQ(parse_json_keeping_order(text), Json::parse(text));
  EXPECT_EQ(parse_json_keeping_order("7"), Json(7));
  EXPECT_EQ(parse_json_keeping_order(R"("s")"), Json("s"));
}

// Containers inside containers that keep growing after them (each closed one is moved into its
// parent): the same value as nlohmann's own parse.
TEST(JsonText, NestedContainersInGrowingParents) {
  std::string text = "{";
  for (int i = 0; i < 300; ++i) {
    if (i > 0) text += ",";
    text += "\"k" + std::to_string(i) + "\": [" + std::to_string(i) + ", {\"a\": [[" +
            std::to_string(i) + "], {}], \"b\": {\"c\": \"" + std::string(i % 7, 'x') + "\"}}, []]";
  }
  text += ", \"tail\": [[[1], [2, [3]]], {\"z\": {\"y\": {\"x\": null}}}]}";
  EXPECT_EQ(parse_json_keeping_order(text), Json::parse(text));
  // A large value followed by more keys at every level.
  std::string items = "1";
  for (int i = 0; i < 10000; ++i) items += ",2";
  const std::string nested = R"({"x": {"x": {"x": [)" + items + R"(], "y": 1}, "y": 2}, "y": 3})";
  EXPECT_EQ(parse_json_keeping_order(nested), Json::parse(nested));
}

TEST(JsonText, ARepeatedKeyKeepsItsFirstPlaceAndItsLastValue) {
  // As Python's json.loads: {"a": 3, "b": 2}.
  const Json parsed = parse_json_keeping_order(R"({"a": 1, "b": 2, "a": {"c": [3]}})");
  EXPECT_EQ(parsed.dump(), R"({"a":{"c":[3]},"b":2})");
}

TEST(JsonText, WhatIsNotJsonOrTooDeepIsDiscarded) {
  for (const std::string text : {"", "{", R"({"a": })", "[1, 2", "{} {}", R"({"a" 1})", "nul"}) {
    EXPECT_TRUE(parse_json_keeping_order(text).is_discarded()) << text;
  }
  const std::string deep =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_TRUE(parse_json_keeping_order(deep).is_discarded());
  const std::string deepest = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json_keeping_order(deepest).is_array());
}

TEST(JsonText, WideObjectsAreParsedWhole) {
  // 80,000 keys in one object: nlohmann's ordered parse took 10 s here (one look-up among the
  // keys before per key); this parse indexes them. Checked for its result, not its time.
  std::string text = "{";
  for (int i = 0; i < 80000; ++i)
    text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  const Json parsed = parse_json_keeping_order(text);
  ASSERT_TRUE(parsed.is_object());
  ASSERT_EQ(parsed.size(), 80000u);
  EXPECT_EQ(parsed.begin().key(), "k0");
  EXPECT_EQ((--parsed.end()).key(), "k79999");
  EXPECT_EQ(parsed.at("k4242"), 4242);
}

}  // namespace
}  // namespace headway::serving
