// ToolCallParser: the calls and content it finds in hermes, llama3_json and mistral answers, whole
// and cut into every possible pair of pieces and into random pieces (a stream gives what a whole
// answer gives), and that nothing the model wrote is lost when a call is malformed.
#include "tool_call_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "pythonic_calls.h"

namespace headway::serving::http {
namespace {

using nlohmann::json;

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

Parsed parse_whole(ToolCallFormat format, const std::string& text, bool single_call = false) {
  ToolCallParser parser(format, single_call);
  Parsed out;
  parser.feed(text, out.content, out.calls);
  parser.finish(out.content, out.calls);
  return out;
}

Parsed parse_pieces(ToolCallFormat format, const std::vector<std::string>& pieces,
                    bool single_call = false) {
  ToolCallParser parser(format, single_call);
  Parsed out;
  for (const std::string& piece : pieces) parser.feed(piece, out.content, out.calls);
  parser.finish(out.content, out.calls);
  return out;
}

// Name and arguments (as JSON values), without the random ids.
std::vector<std::pair<std::string, json>> calls_of(const Parsed& parsed) {
  std::vector<std::pair<std::string, json>> out;
  for (const ToolCall& call : parsed.calls)
    out.emplace_back(call.name, json::parse(call.arguments));
  return out;
}

// The whole answer, every cut into two pieces and random cuts all give the same content and calls.
void expect_cut_invariant(ToolCallFormat format, const std::string& text,
                          bool single_call = false) {
  const Parsed whole = parse_whole(format, text, single_call);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const Parsed pieces =
        parse_pieces(format, {text.substr(0, cut), text.substr(cut)}, single_call);
    EXPECT_EQ(pieces.content, whole.content) << "cut at " << cut;
    EXPECT_EQ(calls_of(pieces), calls_of(whole)) << "cut at " << cut;
  }
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t length = std::uniform_int_distribution<size_t>(0, 6)(random);
      pieces.push_back(text.substr(at, length));
      at += length;
    }
    const Parsed parsed = parse_pieces(format, pieces, single_call);
    EXPECT_EQ(parsed.content, whole.content) << "trial " << trial;
    EXPECT_EQ(calls_of(parsed), calls_of(whole)) << "trial " << trial;
  }
}

TEST(ToolCallParser, FormatsAreNamedAsVllmNamesThem) {
  EXPECT_EQ(tool_call_format_named("hermes"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_named("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(tool_call_format_named("pythonic"), ToolCallFormat::kPythonic);
  EXPECT_EQ(tool_call_format_named("mistral"), ToolCallFormat::kMistral);
  EXPECT_EQ(tool_call_format_named("mistral_v11"), std::nullopt);
  EXPECT_EQ(tool_call_format_named(""), std::nullopt);
}

TEST(ToolCallParser, HermesCallsAndTheTextBeforeThem) {
  const std::string text =
      "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"unit\": \"C\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {\"zone\": \"CET\"}}\n</tool_call>\n";
  const Parsed parsed = parse_whole(ToolCallFormat::kHermes, text);
  EXPECT_EQ(parsed.content, "Let me check both.\n");
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(parsed.calls[0].arguments), json({{"city", "Paris"}, {"unit", "C"}}));
  EXPECT_EQ(parsed.calls[1].name, "get_time");
  EXPECT_EQ(json::parse(parsed.calls[1].arguments), json({{"zone", "CET"}}));
  EXPECT_TRUE(parsed.calls[0].id.starts_with("chatcmpl-tool-"));
  EXPECT_EQ(parsed.calls[0].id.size(), std::string("chatcmpl-tool-").size() + 32);
  EXPECT_NE(parsed.calls[0].id, parsed.calls[1].id);
  expect_cut_invariant(ToolCallFormat::kHermes, text);
}

// Mistral's ids: exactly 9 letters and digits, which its chat templates check.
bool is_mistral_id(const std::string& id) {
  return id.size() == 9 &&
         std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(c) != 0; });
}

TEST(ToolCallParser, MistralCallsBeforeV11AreAJsonArray) {
  const std::string text =
      "Let me look.[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"unit\": \"C\"}}, {\"name\": \"get_time\", \"arguments\": {}}]";
  const Parsed parsed = parse_whole(ToolCallFormat::kMistral, text);
  EXPECT_EQ(parsed.content, "Let me look.");
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(calls_of(parsed)[0],
            std::make_pair(std::string("get_weather"), json({{"city", "Paris"}, {"unit", "C"}})));
  EXPECT_EQ(calls_of(parsed)[1], std::make_pair(std::string("get_time"), json::object()));
  // The arguments keep the order the model wrote them in.
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Paris","unit":"C"})");
  for (const ToolCall& call : parsed.calls) EXPECT_TRUE(is_mistral_id(call.id)) << call.id;
  EXPECT_NE(parsed.calls[0].id, parsed.calls[1].id);
  expect_cut_invariant(ToolCallFormat::kMistral, text);
}

TEST(ToolCallParser, MistralV11CallsFollowEachTag) {
  // v11 tokenizers: name, then the arguments; Hugging Face's tokenizer.json writes "[ARGS]".
  const std::string text =
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time{}";
  const Parsed parsed = parse_whole(ToolCallFormat::kMistral, text);
  EXPECT_EQ(parsed.content, "");
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(calls_of(parsed)[0],
            std::make_pair(std::string("get_weather"), json({{"city", "Paris"}})));
  EXPECT_EQ(calls_of(parsed)[1], std::make_pair(std::string("get_time"), json::object()));
  EXPECT_TRUE(is_mistral_id(parsed.calls[0].id)) << parsed.calls[0].id;
  expect_cut_invariant(ToolCallFormat::kMistral, text);
  // Whitespace before the arguments, a call id between markers, a tag with nothing after it.
  const std::string spaced =
      "[TOOL_CALLS][TOOL_CALLS]get_weather[ARGS] {\"city\": \"Paris\"}"
      "[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{}";
  const Parsed more = parse_whole(ToolCallFormat::kMistral, spaced);
  ASSERT_EQ(more.calls.size(), 2u);
  EXPECT_EQ(more.calls[0].name, "get_weather");
  EXPECT_EQ(more.calls[1].name, "get_time");
  EXPECT_EQ(more.content, "[TOOL_CALLS]");  // the empty one, as written
  expect_cut_invariant(ToolCallFormat::kMistral, spaced);
}

TEST(ToolCallParser, MistralSendsEachCallWhenItsJsonCloses) {
  ToolCallParser parser(ToolCallFormat::kMistral);
  std::string content;
  std::vector<ToolCall> calls;
  parser.feed("Checking [TOOL", content, calls);
  EXPECT_EQ(content, "Checking ");  // "[TOOL" may still become "[TOOL_CALLS]"
  parser.feed("_CALLS]f{\"a\": {\"b\": 1}", content, calls);
  EXPECT_TRUE(calls.empty());  // the arguments are still open
  parser.feed("}[TOOL_CALLS]g", content, calls);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "f");
  EXPECT_EQ(calls[0].arguments, R"({"a":{"b":1}})");
  parser.feed("{}", content, calls);
  ASSERT_EQ(calls.size(), 2u);
  parser.finish(content, calls);
  EXPECT_EQ(content, "Checking ");
  EXPECT_TRUE(parser.called());
}

TEST(ToolCallParser, MistralWithoutTheTagIsAllContent) {
  // A JSON array without the special token (skip_special_tokens left on) is text, as in vLLM.
  const std::string text = R"([{"name": "f", "arguments": {}}] and [TOOL or [TOOL_CALL)";
  const Parsed parsed = parse_whole(ToolCallFormat::kMistral, text);
  EXPECT_EQ(parsed.content, text);
  EXPECT_TRUE(parsed.calls.empty());
  expect_cut_invariant(ToolCallFormat::kMistral, text);
}

TEST(ToolCallParser, MistralMalformedOrCutCallsStayContentAsWritten) {
  // Not JSON, not calls, no name, a name with spaces: each as the model wrote it.
  for (const std::string text : {
           std::string("[TOOL_CALLS][{\"name\": f}]"),
           std::string("[TOOL_CALLS][{\"arguments\": {}}]"),
           std::string("[TOOL_CALLS]{\"a\": 1}"),
           std::string("[TOOL_CALLS]two words{}"),
           std::string("[TOOL_CALLS]f[1, 2]"),
           std::string("[TOOL_CALLS]f[1, 2]{}"),
           std::string("[TOOL_CALLS]no arguments[TOOL_CALLS]f{}"),
       }) {
    const Parsed parsed = parse_whole(ToolCallFormat::kMistral, text);
    if (text.ends_with("[TOOL_CALLS]f{}")) {
      // The first tag has no call; the second has one.
      EXPECT_EQ(parsed.content, "[TOOL_CALLS]no arguments");
      ASSERT_EQ(parsed.calls.size(), 1u);
      EXPECT_EQ(parsed.calls[0].name, "f");
    } else {
      EXPECT_EQ(parsed.content, text);
      EXPECT_TRUE(parsed.calls.empty()) << text;
    }
    expect_cut_invariant(ToolCallFormat::kMistral, text);
  }
  // max_tokens ended the answer inside the arguments: the text, as written.
  const std::string cut = "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Par";
  const Parsed parsed = parse_whole(ToolCallFormat::kMistral, cut);
  EXPECT_EQ(parsed.content, cut);
  EXPECT_TRUE(parsed.calls.empty());
}

TEST(ToolCallParser, MistralTextAfterTheCallsIsContent) {
  const std::string text = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]\n Done.";
  const Parsed parsed = parse_whole(ToolCallFormat::kMistral, text);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.content, "\n Done.");
  const Parsed single =
      parse_whole(ToolCallFormat::kMistral, "[TOOL_CALLS]f{}[TOOL_CALLS]g{}", /*single_call=*/true);
  ASSERT_EQ(single.calls.size(), 1u);
  EXPECT_EQ(single.calls[0].name, "f");
  EXPECT_EQ(single.content, "");
  expect_cut_invariant(ToolCallFormat::kMistral, text);
  expect_cut_invariant(ToolCallFormat::kMistral, "[TOOL_CALLS]f{}\n[TOOL_CALLS]g{} x",
                       /*single_call=*/true);
}

TEST(ToolCallParser, HermesWithoutCallsIsAllContent) {
  // Angle brackets that only start like the tag are content once they cannot be it.
  const std::string text = "a < b, <tool> and <tool_c are not calls <";
  const Parsed parsed = parse_whole(ToolCallFormat::kHermes, text);
  EXPECT_EQ(parsed.content, text);
  EXPECT_TRUE(parsed.calls.empty());
  expect_cut_invariant(ToolCallFormat::kHermes, text);
}

TEST(ToolCallParser, HermesHoldsBackOnlyWhatMayBeTheTag) {
  ToolCallParser parser(ToolCallFormat::kHermes);
  std::string content;
  std::vector<ToolCall> calls;
  parser.feed("Sure. <tool_", content, calls);
  EXPECT_EQ(content, "Sure. ");  // "<tool_" may still become "<tool_call>"
  parser.feed("box> is", content, calls);
  EXPECT_EQ(content, "Sure. <tool_box> is");
  EXPECT_FALSE(parser.called());
}

TEST(ToolCallParser, HermesMalformedCallsStayContentAsWritten) {
  // Not JSON, no name, a name that is not a string: each is given back as the model wrote it.
  const std::string text =
      "x<tool_call>{\"name\": get}</tool_call><tool_call>{\"arguments\": {}}</tool_call>"
      "<tool_call>{\"name\": 3}</tool_call>";
  const Parsed parsed = parse_whole(ToolCallFormat::kHermes, text);
  EXPECT_EQ(parsed.content, text);
  EXPECT_TRUE(parsed.calls.empty());
  expect_cut_invariant(ToolCallFormat::kHermes, text);
}

TEST(ToolCallParser, HermesAnswerCutInsideACall) {
  // max_tokens ended the answer after the JSON but before the closing tag: still a call.
  const Parsed whole_json =
      parse_whole(ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(whole_json.calls.size(), 1u);
  EXPECT_EQ(whole_json.calls[0].name, "f");
  EXPECT_EQ(whole_json.calls[0].arguments, "{}");
  EXPECT_EQ(whole_json.content, "");
  // Cut inside the JSON: the text, as written.
  const Parsed cut = parse_whole(ToolCallFormat::kHermes, "ok<tool_call>{\"name\": \"f\", \"argu");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "ok<tool_call>{\"name\": \"f\", \"argu");
}

TEST(ToolCallParser, HermesWhitespaceAfterACallIsDroppedAndTextKept) {
  const std::string text =
      "<tool_call>{\"name\": \"f\"}</tool_call>\n\n<tool_call>{\"name\": \"g\"}</tool_call>\n"
      "Done.\n";
  const Parsed parsed = parse_whole(ToolCallFormat::kHermes, text);
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].arguments, "{}");  // no arguments written: an empty object
  EXPECT_EQ(parsed.content, "\nDone.\n");
  expect_cut_invariant(ToolCallFormat::kHermes, text);
}

TEST(ToolCallParser, ArgumentsWrittenAsAStringAreKeptAsTheyAre) {
  const Parsed parsed =
      parse_whole(ToolCallFormat::kHermes,
                  R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"a": 1})");
}

// From helper-200's review: arguments that are not an object ("x", [1]) made a call that the
// server then refused when a client sent it back ("must be the JSON text of an object"), so a
// conversation could not go on. They make no call: the text stays content, as any malformed call.
TEST(ToolCallParser, ArgumentsThatAreNoObjectMakeNoCall) {
  for (const std::string call :
       {R"({"name": "f", "arguments": "x"})", R"({"name": "f", "arguments": "[1]"})",
        R"({"name": "f", "arguments": [1]})", R"({"name": "f", "parameters": 3})"}) {
    SCOPED_TRACE(call);
    const std::string text = "<tool_call>" + call + "</tool_call>";
    const Parsed parsed = parse_whole(ToolCallFormat::kHermes, text);
    EXPECT_TRUE(parsed.calls.empty());
    EXPECT_EQ(parsed.content, text);
  }
  // An empty string is a call without arguments, as it is read back.
  const Parsed empty = parse_whole(ToolCallFormat::kHermes,
                                   R"(<tool_call>{"name": "f", "arguments": ""}</tool_call>)");
  ASSERT_EQ(empty.calls.size(), 1u);
  EXPECT_EQ(empty.calls[0].arguments, "");
}

// The model's arguments keep its key order; JSON nested deeper than the limit (a model repeating
// "[") is not a call but text, never a crash when it would be written out again.
TEST(ToolCallParser, ArgumentsKeepTheirOrderAndTooDeepIsText) {
  const Parsed ordered = parse_whole(ToolCallFormat::kHermes,
                                     R"(<tool_call>{"name": "f", "arguments": {"z": 1, "a": 2}})"
                                     R"(</tool_call>)");
  ASSERT_EQ(ordered.calls.size(), 1u);
  EXPECT_EQ(ordered.calls[0].arguments, R"({"z":1,"a":2})");
  const std::string deep =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(100000, '[') +
      std::string(100000, ']') + "}}</tool_call>";
  const Parsed parsed = parse_whole(ToolCallFormat::kHermes, deep);
  EXPECT_TRUE(parsed.calls.empty());
  EXPECT_EQ(parsed.content, deep);
  const std::string deep_llama = "{\"name\": \"f\", \"parameters\": " + std::string(100000, '[') +
                                 std::string(100000, ']') + "}";
  EXPECT_TRUE(parse_whole(ToolCallFormat::kLlama3Json, deep_llama).calls.empty());
}

TEST(ToolCallParser, SingleCallKeepsTheFirst) {
  const Parsed parsed = parse_whole(
      ToolCallFormat::kHermes,
      "<tool_call>{\"name\": \"f\"}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>", true);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "f");
}

TEST(ToolCallParser, Llama3JsonCalls) {
  const std::string text =
      " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris}{\\\"\"}}; "
      "{\"name\": \"get_time\", \"parameters\": {\"zone\": [\"CET\", {\"x\": 1}]}}";
  const Parsed parsed = parse_whole(ToolCallFormat::kLlama3Json, text);
  EXPECT_EQ(parsed.content, "");
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  // Braces and an escaped quote inside a string do not end the object.
  EXPECT_EQ(json::parse(parsed.calls[0].arguments), json({{"city", "Paris}{\""}}));
  EXPECT_EQ(json::parse(parsed.calls[1].arguments),
            json({{"zone", json::array({"CET", {{"x", 1}}})}}));
  expect_cut_invariant(ToolCallFormat::kLlama3Json, text);
  // After the python tag (special tokens kept), and with "arguments" instead of "parameters".
  const Parsed tagged = parse_whole(ToolCallFormat::kLlama3Json,
                                    "<|python_tag|>{\"name\": \"f\", \"arguments\": {\"a\": 1}}");
  ASSERT_EQ(tagged.calls.size(), 1u);
  EXPECT_EQ(json::parse(tagged.calls[0].arguments), json({{"a", 1}}));
  expect_cut_invariant(ToolCallFormat::kLlama3Json, "<|python_tag|>{\"name\": \"f\"}");
}

TEST(ToolCallParser, Llama3TextAnswersStreamAsTheyCome) {
  ToolCallParser parser(ToolCallFormat::kLlama3Json);
  std::string content;
  std::vector<ToolCall> calls;
  parser.feed("  ", content, calls);
  EXPECT_EQ(content, "");  // only whitespace: not yet known
  parser.feed("<|py", content, calls);
  EXPECT_EQ(content, "");  // maybe the python tag
  parser.feed("thon is", content, calls);
  EXPECT_EQ(content, "  <|python is");
  parser.feed(" {fun}", content, calls);
  EXPECT_EQ(content, "  <|python is {fun}");
  parser.finish(content, calls);
  EXPECT_TRUE(calls.empty());
  expect_cut_invariant(ToolCallFormat::kLlama3Json, "  The answer is 4. {\"name\": \"f\"}");
}

TEST(ToolCallParser, PythonicCalls) {
  const std::string text =
      "[get_weather(city='Paris', days=2, units=\"metric\"), now(),\n"
      " plan(steps=[1, -2.5, 3e2, (4, 5)], opts={'fast': True, \"x\": None, 'y': False},"
      " note='it\\'s \\u00e9\\n')]";
  const Parsed parsed = parse_whole(ToolCallFormat::kPythonic, text);
  EXPECT_EQ(parsed.content, "");
  ASSERT_EQ(parsed.calls.size(), 3u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  // Keys in the order written.
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Paris","days":2,"units":"metric"})");
  EXPECT_EQ(parsed.calls[1].name, "now");
  EXPECT_EQ(parsed.calls[1].arguments, "{}");
  EXPECT_EQ(json::parse(parsed.calls[2].arguments),
            json({{"steps", json::array({1, -2.5, 300.0, json::array({4, 5})})},
                  {"opts", {{"fast", true}, {"x", nullptr}, {"y", false}}},
                  {"note", "it's \u00e9\n"}}));
  expect_cut_invariant(ToolCallFormat::kPythonic, text);
  // Llama 4 writes the list between its python tokens (when special tokens are kept).
  const Parsed tagged =
      parse_whole(ToolCallFormat::kPythonic, "<|python_start|>[f(a=1)]<|python_end|>");
  ASSERT_EQ(tagged.calls.size(), 1u);
  EXPECT_EQ(tagged.calls[0].arguments, R"({"a":1})");
  expect_cut_invariant(ToolCallFormat::kPythonic, "<|python_start|>[f(a=1)]<|python_end|>");
}

TEST(ToolCallParser, PythonicThatIsNotCallsIsContentAsWritten) {
  for (const std::string text :
       {"[1, 2]", "[f(1)]", "[]", "[f(x=1)] and more", "[f(x=y)]", "[f(x=1)", "[f(x='a\nb')]",
        "[f(x={1: 2})]", "[f(x=007)]", "The answer is [f(x=1)]", "[f(x=1), g(y=2]"}) {
    const Parsed parsed = parse_whole(ToolCallFormat::kPythonic, text);
    EXPECT_EQ(parsed.content, text);
    EXPECT_TRUE(parsed.calls.empty()) << text;
    expect_cut_invariant(ToolCallFormat::kPythonic, text);
  }
  const std::string deep = "[f(x=" + std::string(1000, '[') + std::string(1000, ']') + ")]";
  EXPECT_TRUE(parse_whole(ToolCallFormat::kPythonic, deep).calls.empty());
  // A string argument that is not UTF-8 (only a caller past the text decoder can pass one) is no
  // call; it threw nlohmann's type_error (helper-129's fuzzing).
  EXPECT_FALSE(parse_pythonic_calls("[f(a=\"\xb8\")]").has_value());
}

TEST(ToolCallParser, Llama3JsonThatIsNotCallsIsContentAsWritten) {
  for (const std::string text : {"{\"answer\": 4}", "{\"name\": \"f\"} and more",
                                 "{\"name\": \"f\"}; {}", "{\"name\": \"f\""}) {
    const Parsed parsed = parse_whole(ToolCallFormat::kLlama3Json, text);
    EXPECT_EQ(parsed.content, text);
    EXPECT_TRUE(parsed.calls.empty()) << text;
    expect_cut_invariant(ToolCallFormat::kLlama3Json, text);
  }
}

}  // namespace
}  // namespace headway::serving::http

namespace headway::serving::http {
namespace {

// Forced calls (tool_choice naming a function or "required"): the whole answer is read at the end,
// and an answer cut short (max_tokens) is content as written.
TEST(ToolCallParser, ForcedNamedArgumentsAreOneCall) {
  ToolCallParser parser(ToolCallFormat::kNamedArguments, false, "get_weather");
  Parsed out;
  parser.feed(R"({"city": "Pa)", out.content, out.calls);
  EXPECT_TRUE(out.content.empty());
  EXPECT_TRUE(out.calls.empty());
  parser.feed(R"(ris", "days": 2})", out.content, out.calls);
  parser.finish(out.content, out.calls);
  EXPECT_TRUE(out.content.empty());
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Paris","days":2})");  // the model's key order
  EXPECT_TRUE(parser.called());

  ToolCallParser cut(ToolCallFormat::kNamedArguments, false, "get_weather");
  Parsed partial;
  cut.feed(R"({"city": "Par)", partial.content, partial.calls);
  cut.finish(partial.content, partial.calls);
  EXPECT_EQ(partial.content, R"({"city": "Par)");
  EXPECT_TRUE(partial.calls.empty());
}

TEST(ToolCallParser, ForcedCallListGivesEachCall) {
  const std::string answer = R"([{"name": "a", "parameters": {"x": 1}}, {"name": "b", )"
                             R"("parameters": {}}])";
  expect_cut_invariant(ToolCallFormat::kCallList, answer);
  const Parsed parsed = parse_whole(ToolCallFormat::kCallList, answer);
  EXPECT_EQ(calls_of(parsed), (std::vector<std::pair<std::string, json>>{{"a", json({{"x", 1}})},
                                                                         {"b", json::object()}}));
  EXPECT_TRUE(parsed.content.empty());
  EXPECT_EQ(parse_whole(ToolCallFormat::kCallList, answer, /*single_call=*/true).calls.size(), 1u);
  // Not a list of calls (cut short): content as written.
  EXPECT_EQ(parse_whole(ToolCallFormat::kCallList, R"([{"name": "a")").content, R"([{"name": "a")");
  EXPECT_EQ(parse_whole(ToolCallFormat::kCallList, "[]").content, "[]");
}

}  // namespace
}  // namespace headway::serving::http
