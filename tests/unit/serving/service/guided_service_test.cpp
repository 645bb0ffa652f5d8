// Guided decoding end to end in LocalGenerationService: the tiny random-weight model writes
// arbitrary bytes on its own, so whatever it answers under a guide is the guide's doing.
#include <gtest/gtest.h>
#include <headway/serving/service_error.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "service_fixture.h"

namespace headway::serving {
namespace {

using test::collect;
using test::text_request;
using test::tiny_deployment;
using test::TinyCheckpoint;

const std::string& kOneEngine = test::kMixedEngine;
const std::string& kDisaggregated = test::kPrefillAndDecodeEngines;
const std::string& kRouterAndTransport = test::kDisaggregatedRouter;

// Every output is short: the string is at most 3 characters, the rest are fixed choices.
const char* kSchema = R"({"type": "object", "properties": {
    "word": {"type": "string", "maxLength": 3},
    "ok": {"type": "boolean"},
    "size": {"enum": ["S", "M", "L"]},
    "note": {"type": "null"}},
  "required": ["word", "ok", "size"]})";

class GuidedServiceTest : public ::testing::Test {
 protected:
  static TinyCheckpoint& checkpoint() { return test::shared_tiny_checkpoint(); }
};

// A request sampled at temperature 1 with `seed`, which ends where its guide lets it.
GenerateInput sampled_request(const std::string& prompt, uint32_t max_tokens, uint64_t seed) {
  GenerateInput input = text_request(prompt, max_tokens);
  input.sampling.temperature = 1.0f;
  input.sampling.seed = seed;
  input.sampling.ignore_eos = false;  // text_request's, for fixed lengths
  return input;
}

GenerateInput guided_request(uint64_t seed) {
  GenerateInput input = sampled_request("Describe it as JSON: ", 96, seed);
  input.guided.kind = GuidedOutput::Kind::kJsonSchema;
  input.guided.schema_json = kSchema;
  input.guided.field = "response_format.json_schema.schema";
  return input;
}

TEST_F(GuidedServiceTest, SampledOutputIsJsonTheSchemaAccepts) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const test::Collected out = collect(*service.submit(guided_request(seed)));
    ASSERT_EQ(out.finish, Finish::kStop) << out.text << " " << out.error;
    const nlohmann::json value = nlohmann::json::parse(out.text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << out.text;
    ASSERT_TRUE(value["word"].is_string()) << out.text;
    EXPECT_TRUE(value["ok"].is_boolean()) << out.text;
    EXPECT_TRUE(value["size"] == "S" || value["size"] == "M" || value["size"] == "L") << out.text;
    for (const auto& [key, field] : value.items()) {
      EXPECT_TRUE(key == "word" || key == "ok" || key == "size" || key == "note") << out.text;
    }
  }
}

// The guide travels with its request from the prefill engine to the decode engine: the same seed
// gives the same answer either way.
TEST_F(GuidedServiceTest, DisaggregationGivesTheAnswerOfOneEngine) {
  std::vector<std::string> mixed;
  {
    LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      mixed.push_back(collect(*service.submit(guided_request(seed))).text);
    }
  }
  LocalGenerationService service(
      tiny_deployment(checkpoint(), kDisaggregated, kRouterAndTransport));
  // All at once: both engine threads use the grammar's shared kept sets at the same time.
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (uint64_t seed = 1; seed <= 4; ++seed)
    streams.push_back(service.submit(guided_request(seed)));
  for (size_t i = 0; i < streams.size(); ++i) {
    const test::Collected out = collect(*streams[i]);
    EXPECT_EQ(out.finish, Finish::kStop) << out.error;
    EXPECT_EQ(out.text, mixed[i]);
  }
}

TEST_F(GuidedServiceTest, AChoiceAnswerIsOneOfTheChoices) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const std::vector<std::string> choices = {"positive", "negative", "neutral", "pos"};
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GenerateInput input = sampled_request("Sentiment: ", 32, seed);
    input.guided.kind = GuidedOutput::Kind::kChoice;
    input.guided.choices = choices;
    const test::Collected out = collect(*service.submit(std::move(input)));
    EXPECT_EQ(out.finish, Finish::kStop);
    EXPECT_NE(std::find(choices.begin(), choices.end(), out.text), choices.end()) << out.text;
  }
}

// From helper-207's review: the log-probabilities of a guided request are those of what the guide
// allows, as vLLM reports them (its grammar bitmask is applied before its sampler reads them): with
// one choice, every token is forced, so each is certain, and no forbidden token is a candidate.
TEST_F(GuidedServiceTest, LogprobsAreThoseOfWhatTheGuideAllows) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput input = sampled_request("Answer: ", 16, 1);
  input.guided.kind = GuidedOutput::Kind::kChoice;
  input.guided.choices = {"yes"};
  input.sampling.logprobs = 3;
  const test::Collected out = collect(*service.submit(std::move(input)));
  ASSERT_EQ(out.finish, Finish::kStop);
  ASSERT_EQ(out.text, "yes");
  ASSERT_EQ(out.logprobs.size(), out.ids.size());  // y, e, s and the end token the guide forces
  ASSERT_EQ(out.ids.size(), 4u);
  for (size_t i = 0; i < out.ids.size(); ++i) {
    EXPECT_NEAR(out.logprobs[i].chosen.logprob, 0.0f, 1e-5f) << i;
    ASSERT_FALSE(out.logprobs[i].top.empty());
    EXPECT_EQ(out.logprobs[i].top[0].token, out.ids[i]) << i;
    for (size_t k = 1; k < out.logprobs[i].top.size(); ++k) {
      EXPECT_LT(out.logprobs[i].top[k].logprob, -1e3f) << i << " candidate " << k;
    }
  }
}

// guided_regex: the whole answer is a match; a schema's pattern and format shape its strings.
TEST_F(GuidedServiceTest, RegexAndPatternAnswersMatchTheirPatterns) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const std::string pattern = "(yes|no), [0-9]{2,4} items( left)?";
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GenerateInput input = sampled_request("Answer: ", 32, seed);
    input.guided.kind = GuidedOutput::Kind::kRegex;
    input.guided.regex = pattern;
    input.guided.field = "guided_regex";
    const test::Collected out = collect(*service.submit(std::move(input)));
    EXPECT_EQ(out.finish, Finish::kStop) << out.error;
    EXPECT_TRUE(std::regex_match(out.text, std::regex(pattern))) << out.text;
  }
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    GenerateInput input = guided_request(seed);
    input.guided.schema_json = R"({"type": "object", "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
        "day": {"type": "string", "format": "date"}}, "required": ["sku", "day"]})";
    const test::Collected out = collect(*service.submit(std::move(input)));
    ASSERT_EQ(out.finish, Finish::kStop) << out.error;
    const nlohmann::json value = nlohmann::json::parse(out.text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << out.text;
    EXPECT_TRUE(std::regex_match(value["sku"].get<std::string>(), std::regex("[A-Z]{3}-[0-9]{2}")))
        << out.text;
    EXPECT_TRUE(std::regex_match(value["day"].get<std::string>(),
                                 std::regex("[0-9]{4}-[01][0-9]-[0-3][0-9]")))
        << out.text;
  }
}

// A bounded number has at most 15 significant digits, so even the random model, which would
// write fraction digits without end, finishes every answer.
TEST_F(GuidedServiceTest, SampledNumbersStayWithinTheirBounds) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    GenerateInput input = guided_request(seed);
    input.max_tokens = 256;
    input.guided.schema_json = R"({"type": "object", "properties": {
        "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 99.99},
        "ratio": {"type": "number", "minimum": -1, "maximum": 1}},
        "required": ["price", "ratio"]})";
    const test::Collected out = collect(*service.submit(std::move(input)));
    ASSERT_EQ(out.finish, Finish::kStop) << out.error << " " << out.text;
    const nlohmann::json value = nlohmann::json::parse(out.text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << out.text;
    const double price = value["price"].get<double>();
    const double ratio = value["ratio"].get<double>();
    EXPECT_TRUE(price > 0 && price <= 99.99) << out.text;
    EXPECT_TRUE(ratio >= -1 && ratio <= 1) << out.text;
  }
}

// Reads kCalc's answers ("calc " expr "="), written here as a recursive-descent parser.
class CalcAnswer {
 public:
  static bool valid(std::string_view text) {
    CalcAnswer reader(text);
    return reader.eat("calc ") && reader.expr(0) && reader.eat("=") && reader.at_ == text.size();
  }

 private:
  explicit CalcAnswer(std::string_view text) : text_(text) {}
  bool eat(std::string_view s) {
    if (text_.substr(at_, s.size()) != s) return false;
    at_ += s.size();
    return true;
  }
  bool expr(int depth) {
    if (depth > 64 || !term(depth)) return false;
    for (int more = 0; more < 3 && (eat(" + ") || eat(" - ")); ++more) {
      if (!term(depth)) return false;
    }
    return true;
  }
  bool term(int depth) {
    if (eat("(")) return expr(depth + 1) && eat(")");
    size_t digits = 0;
    while (at_ < text_.size() && digits < 2 && text_[at_] >= '0' && text_[at_] <= '9') {
      ++at_;
      ++digits;
    }
    return digits > 0;
  }
  std::string_view text_;
  size_t at_ = 0;
};

constexpr const char* kCalc = R"g(root ::= "calc " expr "="
    expr ::= term ((" + " | " - ") term){0,3}
    term ::= [0-9]{1,2} | "(" expr ")")g";

// guided_grammar: the answer is derived from the grammar's root, recursion and all.
TEST_F(GuidedServiceTest, GrammarAnswersFollowTheGrammar) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  size_t ended = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GenerateInput input = text_request("Sum: ", 64);
    input.sampling.temperature = 1.0f;
    input.sampling.seed = seed;
    input.sampling.ignore_eos = false;
    input.guided.kind = GuidedOutput::Kind::kGrammar;
    input.guided.grammar = kCalc;
    input.guided.field = "guided_grammar";
    const test::Collected out = collect(*service.submit(std::move(input)));
    ASSERT_TRUE(out.error.empty()) << out.error;
    if (out.finish != Finish::kStop) continue;  // cut at max_tokens, deep in parentheses
    ++ended;
    EXPECT_TRUE(CalcAnswer::valid(out.text)) << out.text;
  }
  EXPECT_GE(ended, 3u);
}

// starts_after: the shape waits for "</think>" unless the prompt already closed the thinking
// (Qwen3's template with enable_thinking off ends the prompt with an empty think block).
TEST_F(GuidedServiceTest, TheShapeWaitsForTheReasoningUnlessThePromptClosedIt) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  // A guided request after `prompt` whose shape starts after "</think>", with `opener` as Qwen3's
  // parser sets it (empty: DeepSeek-R1's).
  const auto reasoning_request = [](const std::string& prompt, const std::string& opener) {
    GenerateInput input = guided_request(5);
    input.prompt_text = prompt;
    input.guided.starts_after = "</think>";
    input.guided.reasoning_opener = opener;
    return input;
  };
  const test::Collected answer = collect(
      *service.submit(reasoning_request("Describe it as JSON.\n<think>\n\n</think>\n\n", "")));
  EXPECT_EQ(answer.finish, Finish::kStop) << answer.error;
  EXPECT_TRUE(nlohmann::json::parse(answer.text, nullptr, false).is_object()) << answer.text;

  // Thinking: the tiny model's random bytes never write "</think>", so no shape is forced and it
  // may not end either (the end token is held back until the shape is complete).
  GenerateInput thinking = reasoning_request("Describe it as JSON.\n<think>\n", "");
  thinking.max_tokens = 24;
  const test::Collected free = collect(*service.submit(std::move(thinking)));
  EXPECT_EQ(free.finish, Finish::kLength) << free.text;
  EXPECT_EQ(free.text.find("</think>"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(free.text, nullptr, false).is_object()) << free.text;

  // Qwen3's parser (reasoning_opener "<think>"): a prompt that opened the thinking (Qwen3-Thinking-
  // 2507's and QwQ's templates) still thinks first, as above, though the output opens no tag...
  GenerateInput opened = reasoning_request("Describe it as JSON.\n<think>\n", "<think>");
  opened.max_tokens = 24;
  const test::Collected thought = collect(*service.submit(std::move(opened)));
  EXPECT_EQ(thought.finish, Finish::kLength) << thought.text;
  EXPECT_FALSE(nlohmann::json::parse(thought.text, nullptr, false).is_object()) << thought.text;
  // ... while one that did not, answered without a tag first, is shaped from its first token.
  GenerateInput plain = reasoning_request("Describe it as JSON.\n", "<think>");
  const test::Collected shaped = collect(*service.submit(std::move(plain)));
  EXPECT_EQ(shaped.finish, Finish::kStop) << shaped.text;
  EXPECT_TRUE(nlohmann::json::parse(shaped.text, nullptr, false).is_object()) << shaped.text;
}

void expect_refused(LocalGenerationService& service, GenerateInput input, const std::string& param,
                    const std::string& words) {
  try {
    service.submit(std::move(input));
    ADD_FAILURE() << "accepted; expected a refusal naming " << param;
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST_F(GuidedServiceTest, RefusalsNameTheField) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput input = guided_request(1);
  input.guided.schema_json =
      R"({"type": "object", "properties": {"n": {"type": "array", "contains": {"const": 1}}}})";
  expect_refused(service, input, "response_format.json_schema.schema.properties.n.contains",
                 "'contains' is not supported");
  input = guided_request(1);
  input.sampling.ignore_eos = true;
  expect_refused(service, input, "ignore_eos", "response_format.json_schema.schema");
  input = guided_request(1);
  input.sampling.min_tokens = 4;
  expect_refused(service, input, "min_tokens", "however short");
  input = guided_request(1);
  input.guided.kind = GuidedOutput::Kind::kChoice;
  input.guided.field = "guided_choice";
  input.guided.choices = {"a", ""};
  expect_refused(service, input, "guided_choice[1]", "must not be empty");
  input = guided_request(1);
  input.guided.kind = GuidedOutput::Kind::kRegex;
  input.guided.field = "guided_regex";
  input.guided.regex = "(a)\\1";
  expect_refused(service, input, "guided_regex", "a backreference at character 3");
  input.guided.kind = GuidedOutput::Kind::kGrammar;
  input.guided.field = "guided_grammar";
  input.guided.grammar = "root ::= root \"a\" | \"b\"";
  expect_refused(service, input, "guided_grammar", "(rule `root`): can reach itself");
}

}  // namespace
}  // namespace headway::serving
