// Request parsing without a server: what each field becomes in the GenerateInput, and that every
// refusal names its field.
#include "openai_request.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "api_error.h"

namespace headway::serving::http {
namespace {

// The ApiError a body is refused with; fails the test when it is accepted.
ApiError refusal(const std::string& body, bool chat = false) {
  try {
    if (chat) {
      parse_chat_request(body);
    } else {
      parse_completion_request(body);
    }
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

TEST(CompletionRequest, DefaultsFollowOpenAi) {
  const OpenAiRequest parsed = parse_completion_request(R"({"prompt": "hello"})");
  EXPECT_EQ(parsed.input.prompt_kind, GenerateInput::PromptKind::kText);
  EXPECT_EQ(parsed.input.prompt_text, "hello");
  EXPECT_EQ(parsed.input.max_tokens, 16u);
  EXPECT_FLOAT_EQ(parsed.input.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(parsed.input.sampling.top_p, 1.0f);
  EXPECT_EQ(parsed.input.sampling.top_k, 0u);
  EXPECT_TRUE(parsed.input.stop.empty());
  EXPECT_FALSE(parsed.stream);
  EXPECT_FALSE(parsed.include_usage);
  EXPECT_FALSE(parsed.return_token_ids);
  EXPECT_TRUE(parsed.input.request_id.starts_with("cmpl-"));
  EXPECT_EQ(parsed.input.request_id.size(), 5u + 32u);
}

TEST(CompletionRequest, EveryRequestGetsItsOwnIdAndSeed) {
  const OpenAiRequest a = parse_completion_request(R"({"prompt": "x"})");
  const OpenAiRequest b = parse_completion_request(R"({"prompt": "x"})");
  EXPECT_NE(a.input.request_id, b.input.request_id);
  EXPECT_NE(a.input.sampling.seed, b.input.sampling.seed);
}

TEST(CompletionRequest, CarriesSamplingAndExtensions) {
  const OpenAiRequest parsed = parse_completion_request(R"({
    "model": "m", "prompt": [1, 2, 3], "max_tokens": 40, "temperature": 0.5, "top_p": 0.9,
    "top_k": 40, "min_p": 0.05, "seed": -1, "ignore_eos": true, "stop": ["\n", "END"],
    "stop_token_ids": [7], "priority": -3, "request_class": "short", "stream": true,
    "stream_options": {"include_usage": true}, "n": 1, "echo": false, "best_of": 1,
    "logprobs": null, "suffix": "", "presence_penalty": 0, "user": "ignored",
    "return_token_ids": true})");
  const GenerateInput& input = parsed.input;
  EXPECT_EQ(input.model, "m");
  EXPECT_EQ(input.prompt_kind, GenerateInput::PromptKind::kTokenIds);
  EXPECT_EQ(input.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(input.max_tokens, 40u);
  EXPECT_FLOAT_EQ(input.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(input.sampling.top_p, 0.9f);
  EXPECT_EQ(input.sampling.top_k, 40u);
  EXPECT_FLOAT_EQ(input.sampling.min_p, 0.05f);
  EXPECT_EQ(input.sampling.seed, ~uint64_t{0});
  EXPECT_TRUE(input.sampling.ignore_eos);
  EXPECT_EQ(input.sampling.stop_token_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(input.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(input.priority, -3);
  EXPECT_EQ(input.request_class, "short");
  EXPECT_TRUE(parsed.stream);
  EXPECT_TRUE(parsed.include_usage);
  EXPECT_TRUE(parsed.return_token_ids);
}

TEST(CompletionRequest, OnePromptBatchesAreThatPrompt) {
  EXPECT_EQ(parse_completion_request(R"({"prompt": ["only"]})").input.prompt_text, "only");
  EXPECT_EQ(parse_completion_request(R"({"prompt": [[4, 5]]})").input.prompt_ids,
            (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "stop": "s"})").input.stop,
            (std::vector<std::string>{"s"}));
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "top_k": -1})").input.sampling.top_k, 0u);
}

struct Refused {
  const char* body;
  const char* param;    // expected "param"
  const char* message;  // a substring of the message
  bool chat = false;
};

class RefusedRequest : public ::testing::TestWithParam<Refused> {};

TEST_P(RefusedRequest, NamesTheField) {
  const Refused& want = GetParam();
  const ApiError error = refusal(want.body, want.chat);
  EXPECT_EQ(error.status(), 400);
  EXPECT_EQ(error.param(), want.param) << error.what();
  EXPECT_NE(std::string(error.what()).find(want.message), std::string::npos) << error.what();
}

INSTANTIATE_TEST_SUITE_P(
    Completions, RefusedRequest,
    ::testing::Values(
        Refused{R"({"prompt": "x",)", "", "(byte 16): parse error at line 1, column 16"},
        Refused{"{\"prompt\": \"\xff\"}", "", "UTF-8"},
        Refused{R"([1, 2])", "", "must be a JSON object, not an array"},
        Refused{R"({})", "prompt", "prompt is required"},
        Refused{R"({"prompt": 5})", "prompt", "not an integer"},
        Refused{R"({"prompt": []})", "prompt", "empty"},
        Refused{R"({"prompt": ["a", 3]})", "prompt[1]", "must be a string or token ids"},
        Refused{R"({"prompt": [[1], []]})", "prompt[1]", "must not be an empty array"},
        Refused{R"({"prompt": ["a", "b"], "n": 65})", "n", "130 choices, over the limit of 128"},
        Refused{R"({"prompt": [1, "a"]})", "prompt[1]", "token id"},
        Refused{R"({"prompt": [1, -4]})", "prompt[1]", "not a valid token id"},
        Refused{R"({"prompt": "x", "max_tokens": "5"})", "max_tokens", "must be an integer"},
        Refused{R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "between 1 and"},
        Refused{R"({"prompt": "x", "allowed_token_ids": 5})", "allowed_token_ids",
                "must be an array"},
        Refused{R"({"prompt": "x", "allowed_token_ids": [5, "a"]})", "allowed_token_ids[1]", ""},
        Refused{R"({"prompt": "x", "bad_words": "no"})", "bad_words",
                "must be an array of strings"},
        Refused{R"({"prompt": "x", "bad_words": ["no", 3]})", "bad_words[1]",
                "bad_words[1] must be a string"},
        Refused{R"({"prompt": "x", "echo": true, "truncate_prompt_tokens": 4})", "echo",
                "not supported"},
        Refused{R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens", "not a number"},
        Refused{R"({"prompt": "x", "temperature": "hot"})", "temperature", "must be a number"},
        Refused{R"({"prompt": "x", "top_p": 1e300})", "top_p",
                "beyond the range of a 32-bit float"},
        Refused{R"({"prompt": "x", "temperature": 1e308})", "temperature",
                "(magnitude at most 3.40282e+38)"},
        Refused{R"({"prompt": "x", "seed": 1.5})", "seed", "must be an integer"},
        Refused{R"({"prompt": "x", "stop": 3})", "stop", "string or an array"},
        Refused{R"({"prompt": "x", "stop": ["a", 1]})", "stop[1]", "must be a string"},
        Refused{R"({"prompt": "x", "stop": ["a", ""]})", "stop[1]", "must not be empty"},
        Refused{R"({"prompt": "x", "stream": "yes"})", "stream", "must be a boolean"},
        Refused{R"({"prompt": "x", "return_token_ids": 1})", "return_token_ids",
                "must be a boolean"},
        Refused{R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options",
                "only allowed with"},
        Refused{R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
                "stream_options.include_usage", "must be a boolean"},
        Refused{R"({"prompt": "x", "n": 0})", "n", "between 1 and 128"},
        Refused{R"({"prompt": "x", "n": 129})", "n", "between 1 and 128"},
        Refused{R"({"prompt": "x", "logprobs": 21})", "logprobs", "between 0 and 20"},
        Refused{R"({"prompt": "x", "logprobs": true})", "logprobs", "must be an integer"},
        Refused{R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "between 1 and"},
        Refused{R"({"prompt": "x", "prompt_logprobs": -1})", "prompt_logprobs", "whole vocabulary"},
        Refused{R"({"prompt": "x", "prompt_logprobs": 21})", "prompt_logprobs", "between -1"},
        Refused{R"({"prompt": "x", "prompt_logprobs": "2"})", "prompt_logprobs",
                "must be an integer"},
        Refused{R"({"prompt": "x", "stream": true, "prompt_logprobs": 0})", "prompt_logprobs",
                "not available"},
        Refused{R"({"prompt": "x", "best_of": 3})", "best_of", "not supported"},
        Refused{R"({"prompt": "x", "suffix": "tail"})", "suffix", "not supported"},
        Refused{R"({"prompt": "x", "frequency_penalty": "high"})", "frequency_penalty",
                "must be a number"},
        Refused{R"({"prompt": "x", "logit_bias": [1, 5]})", "logit_bias", "must be an object"},
        Refused{R"({"prompt": "x", "logit_bias": {"a1": 5}})", "logit_bias.a1",
                "is not a token id"},
        Refused{R"({"prompt": "x", "logit_bias": {"-3": 5}})", "logit_bias.-3",
                "is not a token id"},
        Refused{R"({"prompt": "x", "logit_bias": {"1": "up"}})", "logit_bias.1",
                "must be a number"},
        Refused{R"({"prompt": "x", "min_tokens": -1})", "min_tokens", "between"},
        Refused{R"({"prompt": "x", "priority": 3000000000})", "priority", "between"},
        // A number no double holds: refused as the body, not a server error.
        Refused{R"({"prompt": "x", "temperature": 1e400})", "", "not valid JSON: number overflow"},
        // vLLM's output-shaping extensions are refused rather than ignored.
        Refused{R"({"prompt": "x", "guided_choice": "a"})", "guided_choice",
                "must be an array of strings"},
        Refused{R"({"prompt": "x", "guided_choice": ["a", 2]})", "guided_choice[1]",
                "must be a string"},
        // An empty list asks for an answer that cannot exist: it served unconstrained text.
        Refused{R"({"prompt": "x", "guided_choice": []})", "guided_choice",
                "needs at least one choice"},
        Refused{R"({"prompt": "x", "structured_outputs": {"choice": []}})",
                "structured_outputs.choice", "needs at least one choice"},
        Refused{R"({"prompt": "x", "guided_json": 5})", "guided_json", "must be a JSON schema"},
        Refused{R"({"prompt": "x", "guided_json": {}, "guided_choice": ["a"]})", "guided_choice",
                "only one of"},
        Refused{R"({"prompt": "x", "guided_regex": ["a+"]})", "guided_regex",
                "must be a regular expression (a string)"},
        Refused{R"({"prompt": "x", "guided_regex": "a", "guided_choice": ["a"]})", "guided_regex",
                "only one of"},
        Refused{R"({"prompt": "x", "structured_outputs": {"structural_tag": {}}})",
                "structured_outputs.structural_tag", "not supported"},
        Refused{R"({"prompt": "x", "structured_outputs": {"grammar": 3}})",
                "structured_outputs.grammar", "must be a GBNF grammar (a string)"},
        Refused{R"({"prompt": "x", "structured_outputs": {"regex": "a", "choice": ["a"]}})",
                "structured_outputs",
                "not both structured_outputs.choice and structured_outputs.regex"},
        Refused{R"({"prompt": "x", "structured_outputs": {}})", "structured_outputs",
                "needs one of json, regex, choice, grammar or json_object"},
        Refused{R"({"prompt": "x", "structured_outputs": false})", "structured_outputs",
                "must be an object"},
        Refused{R"({"prompt": "x", "guided_regex": ""})", "guided_regex", "must not be empty"},
        Refused{R"({"prompt": "x", "structured_outputs": {"disable_fallback": true}})",
                "structured_outputs", "needs one of json, regex, choice, grammar or json_object"},
        Refused{R"({"prompt": "x", "structured_outputs": {"regx": "a"}})",
                "structured_outputs.regx", "is not a structured_outputs field"},
        Refused{R"({"prompt": "x", "structured_outputs": "a+"})", "structured_outputs",
                "must be an object"},
        Refused{R"({"prompt": "x", "guided_grammar": {"root": "x"}})", "guided_grammar",
                "must be a GBNF grammar (a string)"},
        Refused{R"({"prompt": "x", "guided_grammar": "root ::= \"a\"", "guided_regex": "a"})",
                "guided_grammar", "only one of"},
        Refused{R"({"prompt": "x", "include_stop_str_in_output": 1})", "include_stop_str_in_output",
                "must be a boolean"},
        Refused{R"({"prompt": "x", "skip_special_tokens": "no"})", "skip_special_tokens",
                "must be a boolean"},
        Refused{R"({"prompt": "x", "add_special_tokens": "false"})", "add_special_tokens",
                "must be a boolean"},
        Refused{R"({"prompt": [1, 2], "add_special_tokens": 0})", "add_special_tokens",
                "must be a boolean"},
        Refused{R"({"prompt": "x", "truncate_prompt_tokens": "8"})", "truncate_prompt_tokens",
                "must be an integer"},
        Refused{R"({"prompt": "x", "model": 7})", "model", "must be a string"},
        // An integer beyond 64 bits reaches the parser as a float: the message says why it is
        // refused, not that it is no integer.
        Refused{R"({"prompt": "x", "seed": 18446744073709551621})", "seed", "must fit in 64 bits"},
        // ... and prints it whole, not as 1.8446744073709552e+19.
        Refused{R"({"prompt": "x", "seed": 18446744073709551616})", "seed",
                "not 18446744073709551616"},
        // One below -2^63 rounds to exactly -2^63 as a double: still refused.
        Refused{R"({"prompt": "x", "seed": -9223372036854775809})", "seed", "must fit in 64 bits"},
        Refused{R"({"prompt": "x", "max_tokens": 10.5})", "max_tokens", "must be an integer"},
        Refused{R"({"prompt": "x", "max_tokens": 1e30})", "max_tokens", "between"},
        // An integer past 64 bits is printed whole where a range is refused too (helper-162).
        Refused{R"({"prompt": "x", "max_tokens": 18446744073709551616})", "max_tokens",
                "between 1 and 4294967295, not 18446744073709551616"},
        // A positive number a float cannot hold was taken as 0, refused as "got 0" where a
        // field must be positive (helper-162); where 0 is allowed it is 0 (test below).
        Refused{R"({"prompt": "x", "repetition_penalty": 1e-308})", "repetition_penalty",
                "repetition_penalty is 1e-308: too small for a 32-bit float"},
        Refused{R"({"prompt": "x", "top_p": 1e-300})", "top_p",
                "top_p is 1e-300: too small for a 32-bit float"}));

// Whole numbers written as floats are the integers they spell, as pydantic (and so vLLM) reads
// them.
TEST(CompletionRequest, WholeFloatsAreIntegers) {
  const OpenAiRequest parsed =
      parse_completion_request(R"({"prompt": "x", "max_tokens": 1e1, "seed": -2.0})");
  EXPECT_EQ(parsed.input.max_tokens, 10u);
  EXPECT_EQ(parsed.input.sampling.seed, static_cast<uint64_t>(int64_t{-2}));
}

// A positive number too small for a float is 0 where 0 is allowed (a temperature of 1e-50 is
// greedy, as vLLM takes it); a negative one stays negative, so that the range checks refuse a
// temperature of -1e-50 as vLLM does.
TEST(CompletionRequest, ANumberTooSmallForAFloatKeepsItsSign) {
  const OpenAiRequest parsed = parse_completion_request(
      R"({"prompt": "x", "temperature": 1e-50, "presence_penalty": -1e-300})");
  EXPECT_EQ(parsed.input.sampling.temperature, 0.0f);
  EXPECT_LT(parsed.input.sampling.presence_penalty, 0.0f);
  EXPECT_GT(parsed.input.sampling.presence_penalty, -1e-44f);
  EXPECT_LT(parse_completion_request(R"({"prompt": "x", "temperature": -1e-50})")
                .input.sampling.temperature,
            0.0f);
}

TEST(CompletionRequest, SeedsAtThe64BitEdgesAreKept) {
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "seed": -9223372036854775808})")
                .input.sampling.seed,
            uint64_t{1} << 63);
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "seed": 18446744073709551615})")
                .input.sampling.seed,
            ~uint64_t{0});
}

TEST(ChatRequest, JoinsTextPartsAndMapsDeveloperToSystem) {
  const OpenAiRequest parsed = parse_chat_request(R"({"messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
      {"role": "assistant", "content": null}]})");
  const GenerateInput& input = parsed.input;
  EXPECT_EQ(input.prompt_kind, GenerateInput::PromptKind::kChat);
  ASSERT_EQ(input.messages.size(), 3u);
  EXPECT_EQ(input.messages[0].role, "system");
  EXPECT_EQ(input.messages[0].content, "be brief");
  EXPECT_EQ(input.messages[1].content, "one\ntwo");
  EXPECT_EQ(input.messages[2].content, "");
  EXPECT_TRUE(input.request_id.starts_with("chatcmpl-"));
  // No limit given: up to the context length, which the service bounds by the prompt.
  EXPECT_TRUE(input.max_tokens_to_context_end);
}

TEST(ChatRequest, MaxCompletionTokensWinsOverMaxTokens) {
  const char* body =
      R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 9,
          "max_completion_tokens": 4})";
  EXPECT_EQ(parse_chat_request(body).input.max_tokens, 4u);
  // A refusal for the length names the field that set it.
  EXPECT_EQ(parse_chat_request(body).input.max_tokens_field, "max_completion_tokens");
  EXPECT_EQ(
      parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 9})")
          .input.max_tokens,
      9u);
}

// vLLM's template options: the generation prompt left out, or the final message continued.
TEST(ChatRequest, TemplateOptions) {
  const GenerateInput defaults =
      parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})").input;
  EXPECT_TRUE(defaults.add_generation_prompt);
  EXPECT_FALSE(defaults.continue_final_message);
  const GenerateInput continued = parse_chat_request(R"({"messages": [
      {"role": "user", "content": "x"}, {"role": "assistant", "content": "The answer is"}],
      "add_generation_prompt": false, "continue_final_message": true})")
                                      .input;
  EXPECT_FALSE(continued.add_generation_prompt);
  EXPECT_TRUE(continued.continue_final_message);
}

INSTANTIATE_TEST_SUITE_P(
    Chat, RefusedRequest,
    ::testing::Values(
        Refused{R"({})", "messages", "messages is required", true},
        Refused{R"({"messages": {}})", "messages", "must be an array", true},
        Refused{R"({"messages": []})", "messages", "must not be empty", true},
        Refused{R"({"messages": ["hi"]})", "messages[0]", "must be an object", true},
        Refused{R"({"messages": [{"content": "x"}]})", "messages[0].role", "required", true},
        Refused{R"({"messages": [{"role": "function", "content": "x"}]})", "messages[0].role",
                "not supported", true},
        Refused{R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].tool_call_id",
                "required", true},
        Refused{R"({"messages": [{"role": "user"}]})", "messages[0].content", "required", true},
        Refused{R"({"messages": [{"role": "user", "content": 3}]})", "messages[0].content",
                "string or an array", true},
        Refused{R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                "messages[0].content[0].type", "not supported", true},
        Refused{R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
                "messages[0].content[0].text", "required", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1})",
                "max_completion_tokens", "between", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs",
                "must be a boolean", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
                "top_logprobs", "needs \"logprobs\": true", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
                    "top_logprobs": 21})",
                "top_logprobs", "between 0 and 20", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools",
                "must be an array", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})",
                "tools[0].function", "required", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tools": [{"type": "retrieval", "function": {"name": "f"}}]})",
                "tools[0].type", "not supported", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tools": [{"type": "function", "function": {"description": "d"}}]})",
                "tools[0].function.name", "required", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tools": [{"function": {"name": "f", "parameters": "{}"}}]})",
                "tools[0].function.parameters", "must be an object", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tools": [{"function": {"name": "f"}}], "tool_choice": "any"})",
                "tool_choice", "is not one of", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tools": [{"function": {"name": "f"}}],
                    "tool_choice": {"type": "function", "function": {"name": "g"}}})",
                "tool_choice.function.name", "not among the tools", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tools": [{"function": {"name": "f"}}], "tool_choice": "required",
                    "response_format": {"type": "json_object"}})",
                "tool_choice", "cannot be combined with response_format", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tools": [{"function": {"name": "f"}}], "parallel_tool_calls": 1})",
                "parallel_tool_calls", "must be a boolean", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "response_format": {"type": "xml"}})",
                "response_format.type", "must be", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "response_format": {"type": "json_schema", "json_schema": {"name": "a"}}})",
                "response_format.json_schema.schema", "is required", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "functions": [{}]})",
                "functions", "not supported", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "chat_template_kwargs": [true]})",
                "chat_template_kwargs", "must be an object, not an array", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "include_reasoning": 0})",
                "include_reasoning", "must be a boolean", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "function_call": "auto"})",
                "function_call", "not supported", true},
        Refused{R"({"messages": [{"role": "assistant", "content": null,
                                  "tool_calls": [{"id": "c1"}]}]})",
                "messages[0].tool_calls[0].function", "required", true},
        Refused{R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id":
                    "c1", "function": {"name": "f", "arguments": "{\"a\": "}}]}]})",
                "messages[0].tool_calls[0].function.arguments", "JSON text of an object", true},
        Refused{R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id":
                    "c1", "function": {"name": "f", "arguments": 3}}]}]})",
                "messages[0].tool_calls[0].function.arguments", "must be a string", true},
        Refused{R"({"messages": [{"role": "user", "content": "x", "tool_calls": [{"id": "c1",
                    "function": {"name": "f", "arguments": "{}"}}]}]})",
                "messages[0].tool_calls", "only for assistant messages", true},
        Refused{R"({"messages": [{"role": "assistant", "content": "x"}],
                    "continue_final_message": true})",
                "continue_final_message", "needs add_generation_prompt set to false", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
                "tool_choice", "needs tools", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tool_choice": {"type": "function", "function": {"name": "f"}}})",
                "tool_choice", "needs tools", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "tool_choice": {"type": "function", "function": {}}})",
                "tool_choice.function.name", "required", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}],
                    "chat_template": "{{ messages[0].content }}"})",
                "chat_template", "not supported", true},
        Refused{R"({"messages": [{"role": "user", "content": "x"}], "add_special_tokens": 1})",
                "add_special_tokens", "must be a boolean", true}));

// Tools: "auto" by default (the calls are parsed), "none" keeps them in the prompt only; a tool
// message's fields and a name go to the template.
TEST(ChatRequest, ToolsAndTheirChoice) {
  const std::string tools = R"("tools": [{"function": {"name": "f"}}])";
  const OpenAiRequest automatic = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x", "name": "ann"}], )" + tools + "}");
  EXPECT_TRUE(automatic.parse_tool_calls);
  EXPECT_TRUE(automatic.parallel_tool_calls);
  EXPECT_EQ(automatic.input.tools_json, R"([{"function":{"name":"f"}}])");
  EXPECT_EQ(automatic.input.messages[0].fields_json, R"({"name":"ann"})");
  const OpenAiRequest none = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none", )" + tools + "}");
  EXPECT_FALSE(none.parse_tool_calls);
  EXPECT_EQ(none.input.tools_json, automatic.input.tools_json);
  const OpenAiRequest plain =
      parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})");
  EXPECT_TRUE(plain.input.tools_json.empty());
  EXPECT_TRUE(plain.input.messages[0].fields_json.empty());
  // tools: null is no tools; a call's arguments null or "" are a call without arguments (as vLLM
  // takes them).
  EXPECT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                     "tools": null})")
                  .input.tools_json.empty());
  const OpenAiRequest no_arguments = parse_chat_request(R"({"messages": [{"role": "assistant",
      "content": null, "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": ""}},
                                      {"id": "b", "function": {"name": "g", "arguments": null}}]}]})");
  EXPECT_EQ(no_arguments.input.messages[0].fields_json,
            R"({"tool_calls":[{"id":"a","function":{"name":"f","arguments":{}}},)"
            R"({"id":"b","function":{"name":"g","arguments":{}}}]})");
  // chat_template_kwargs: given to the template in the client's order.
  EXPECT_EQ(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                   "chat_template_kwargs": {"z": 1, "enable_thinking": false}})")
                .input.template_kwargs_json,
            R"({"z":1,"enable_thinking":false})");
  EXPECT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                     "chat_template_kwargs": {}})")
                  .input.template_kwargs_json.empty());
  // /tokenize renders the same prompt, so it takes the tools too.
  EXPECT_EQ(
      parse_tokenize_request(R"({"messages": [{"role": "user", "content": "x"}], )" + tools + "}")
          .tools_json,
      automatic.input.tools_json);
}

// vLLM's truncate_prompt_tokens reaches the service as given, on both endpoints; the service
// checks it against max_model_len (and refuses 0).
TEST(ChatRequest, GuidedFieldsBecomeTheGuidedOutputInTheClientsKeyOrder) {
  OpenAiRequest r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
        "schema": {"type": "object", "properties": {"zeta": {"type": "string"},
                                                    "alpha": {"type": "integer"}}}}}})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kJsonSchema);
  EXPECT_EQ(r.input.guided.field, "response_format.json_schema.schema");
  // Declared properties are generated in the schema's order: "zeta" must stay first.
  EXPECT_EQ(
      r.input.guided.schema_json,
      R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");
  r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_object"}})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kJsonObject);
  r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "text"}})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kNone);
  r = parse_completion_request(R"({"prompt": "x", "guided_choice": ["yes", "no"]})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kChoice);
  EXPECT_EQ(r.input.guided.choices, (std::vector<std::string>{"yes", "no"}));
  r = parse_completion_request(R"({"prompt": "x", "guided_json": "{\"type\": \"boolean\"}"})");
  EXPECT_EQ(r.input.guided.field, "guided_json");
  EXPECT_EQ(r.input.guided.schema_json, R"({"type": "boolean"})");
  r = parse_completion_request(R"({"prompt": "x", "guided_regex": "[0-9]{3}"})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kRegex);
  EXPECT_EQ(r.input.guided.regex, "[0-9]{3}");
  EXPECT_EQ(r.input.guided.field, "guided_regex");
  // vLLM's structured_outputs, with the options that ask for what guided decoding does anyway.
  r = parse_completion_request(R"({"prompt": "x", "structured_outputs": {"regex": "a|b",
      "disable_any_whitespace": true, "disable_fallback": false}})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kRegex);
  EXPECT_EQ(r.input.guided.field, "structured_outputs.regex");
  r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
      "structured_outputs": {"json": {"properties": {"b": {}, "a": {}}}, "regex": null}})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kJsonSchema);
  EXPECT_EQ(r.input.guided.schema_json, R"({"properties":{"b":{},"a":{}}})");
  EXPECT_EQ(r.input.guided.field, "structured_outputs.json");
  r = parse_completion_request(
      R"({"prompt": "x", "structured_outputs": {"choice": ["up", "down"]}})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kChoice);
  EXPECT_EQ(r.input.guided.field, "structured_outputs.choice");
  r = parse_completion_request(R"({"prompt": "x", "structured_outputs": {"json_object": true}})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kJsonObject);
  r = parse_completion_request(R"({"prompt": "x", "guided_grammar": "root ::= \"a\"+"})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kGrammar);
  EXPECT_EQ(r.input.guided.grammar, R"(root ::= "a"+)");
  EXPECT_EQ(r.input.guided.field, "guided_grammar");
  r = parse_completion_request(
      R"({"prompt": "x", "structured_outputs": {"grammar": "root ::= [0-9]"}})");
  EXPECT_EQ(r.input.guided.kind, GuidedOutput::Kind::kGrammar);
  EXPECT_EQ(r.input.guided.field, "structured_outputs.grammar");
}

TEST(CompletionRequest, IncludeStopStrInOutputPassesThrough) {
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x"})").input.include_stop_str_in_output);
  EXPECT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                     "include_stop_str_in_output": true})")
                  .input.include_stop_str_in_output);
}

TEST(CompletionRequest, SkipSpecialTokensPassesThroughAndIsOnByDefault) {
  EXPECT_TRUE(parse_completion_request(R"({"prompt": "x"})").input.skip_special_tokens);
  EXPECT_FALSE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                      "skip_special_tokens": false})")
                   .input.skip_special_tokens);
}

// vLLM's add_special_tokens: unset, the service takes the form's default (true for a text
// prompt, false for chat messages); set, it goes to the prompt encoder as sent.
TEST(CompletionRequest, AddSpecialTokensPassesThroughAndIsUnsetByDefault) {
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x"})").input.add_special_tokens, std::nullopt);
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "add_special_tokens": false})")
                .input.add_special_tokens,
            false);
  EXPECT_EQ(parse_completion_request(R"({"prompt": ["x", "y"], "add_special_tokens": false})")
                .input.add_special_tokens,
            false);
  EXPECT_EQ(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})")
                .input.add_special_tokens,
            std::nullopt);
  EXPECT_EQ(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                   "add_special_tokens": true})")
                .input.add_special_tokens,
            true);
}

TEST(CompletionRequest, TruncatePromptTokensPassesThrough) {
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x"})").input.truncate_prompt_tokens);
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "truncate_prompt_tokens": null})")
                   .input.truncate_prompt_tokens);
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "truncate_prompt_tokens": 8})")
                .input.truncate_prompt_tokens,
            8);
  EXPECT_EQ(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                   "truncate_prompt_tokens": -1})")
                .input.truncate_prompt_tokens,
            -1);
}

// Penalties, min_tokens and logit_bias reach the service as given (it checks their ranges and the
// token ids against the model); null is "not set".
TEST(CompletionRequest, LogitsProcessingFieldsPassThrough) {
  const core::SamplingParams set =
      parse_completion_request(R"({"prompt": "x", "presence_penalty": 0.5,
                                   "frequency_penalty": -1.25, "repetition_penalty": 1.1,
                                   "min_tokens": 3, "logit_bias": {"7": -100, "12": 2.5,
                                   "9": null}, "allowed_token_ids": [9, 4, 9],
                                   "bad_words": ["no", " never"]})")
          .input.sampling;
  EXPECT_EQ(set.allowed_token_ids, (std::vector<int32_t>{9, 4, 9}));  // the service sorts them
  // The words, as written: the service encodes them with the model's tokenizer.
  EXPECT_EQ(
      parse_completion_request(R"({"prompt": "x", "bad_words": ["no", " never"]})").input.bad_words,
      (std::vector<std::string>{"no", " never"}));
  EXPECT_TRUE(
      parse_completion_request(R"({"prompt": "x", "bad_words": null})").input.bad_words.empty());
  EXPECT_EQ(set.presence_penalty, 0.5f);
  EXPECT_EQ(set.frequency_penalty, -1.25f);
  EXPECT_EQ(set.repetition_penalty, 1.1f);
  EXPECT_EQ(set.min_tokens, 3u);
  std::vector<std::pair<int32_t, float>> bias = set.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{{7, -100.0f}, {12, 2.5f}}));
  const core::SamplingParams unset =
      parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                             "presence_penalty": null, "repetition_penalty": null,
                             "logit_bias": null, "min_tokens": null, "allowed_token_ids": []})")
          .input.sampling;
  EXPECT_FALSE(unset.uses_host_processing());
  EXPECT_EQ(unset.repetition_penalty, 1.0f);
}

// A batch of prompts: the first in `input`, the others in more_prompts, text or token ids.
TEST(CompletionRequest, ABatchKeepsEveryPrompt) {
  const OpenAiRequest batch = parse_completion_request(R"({"prompt": ["one", [5, 6], "three"]})");
  EXPECT_EQ(batch.input.prompt_kind, GenerateInput::PromptKind::kText);
  EXPECT_EQ(batch.input.prompt_text, "one");
  ASSERT_EQ(batch.more_prompts.size(), 2u);
  EXPECT_EQ(batch.more_prompts[0].prompt_kind, GenerateInput::PromptKind::kTokenIds);
  EXPECT_EQ(batch.more_prompts[0].prompt_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(batch.more_prompts[1].prompt_text, "three");
  EXPECT_TRUE(parse_completion_request(R"({"prompt": ["only"]})").more_prompts.empty());
}

// logprobs: completions' integer, chat's boolean and top_logprobs; absent or false is -1 (off).
TEST(CompletionRequest, LogprobsBecomeTheCountOfTopTokens) {
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x"})").input.sampling.logprobs, -1);
  EXPECT_EQ(
      parse_completion_request(R"({"prompt": "x", "logprobs": null})").input.sampling.logprobs, -1);
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "logprobs": 0})").input.sampling.logprobs,
            0);
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "logprobs": 5})").input.sampling.logprobs,
            5);
  const auto chat = [](const std::string& extra) {
    return parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}])" + extra + "}")
        .input.sampling.logprobs;
  };
  EXPECT_EQ(chat(""), -1);
  EXPECT_EQ(chat(R"(, "logprobs": false, "top_logprobs": 0)"), -1);
  EXPECT_EQ(chat(R"(, "logprobs": true)"), 0);
  EXPECT_EQ(chat(R"(, "logprobs": true, "top_logprobs": 20)"), 20);
}

// prompt_logprobs is asked of the service as sent; echo with logprobs asks for the prompt's too
// (as many as the larger count), max_tokens 0 with echo runs one token for the prompt alone.
TEST(CompletionRequest, PromptLogprobsAndEchoBecomeWhatTheServiceComputes) {
  OpenAiRequest r = parse_completion_request(R"({"prompt": "x", "prompt_logprobs": 3})");
  EXPECT_EQ(r.prompt_logprobs, 3);
  EXPECT_EQ(r.input.sampling.prompt_logprobs, 3);
  EXPECT_FALSE(r.echo);
  r = parse_completion_request(R"({"prompt": "x", "prompt_logprobs": null, "echo": true})");
  EXPECT_EQ(r.prompt_logprobs, -1);
  EXPECT_EQ(r.input.sampling.prompt_logprobs, -1);
  EXPECT_TRUE(r.echo);
  EXPECT_FALSE(r.echo_only);
  EXPECT_EQ(r.input.max_tokens, 16u);
  r = parse_completion_request(
      R"({"prompt": "x", "echo": true, "logprobs": 4, "prompt_logprobs": 1, "max_tokens": 0})");
  EXPECT_EQ(r.prompt_logprobs, 1);
  EXPECT_EQ(r.input.sampling.prompt_logprobs, 4);
  EXPECT_TRUE(r.echo_only);
  EXPECT_EQ(r.input.max_tokens, 1u);
  r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 0})");
  EXPECT_EQ(r.input.sampling.prompt_logprobs, 0);
}

// vLLM's chat echo takes the final message's text when it is the assistant's, and nothing else;
// it is not the completions' echo (no prompt text, no prompt logprobs).
TEST(ChatRequest, EchoTakesTheFinalAssistantMessage) {
  OpenAiRequest r = parse_chat_request(R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "The answer is"}], "echo": true, "logprobs": true})");
  EXPECT_EQ(r.chat_echo, "The answer is");
  EXPECT_FALSE(r.echo);
  EXPECT_EQ(r.input.sampling.prompt_logprobs, -1);
  r = parse_chat_request(R"({"messages": [{"role": "assistant", "content": "a"},
      {"role": "user", "content": "q"}], "echo": true})");
  EXPECT_EQ(r.chat_echo, "");  // asked, nothing to echo
  r = parse_chat_request(R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "a"}], "echo": false})");
  EXPECT_FALSE(r.chat_echo.has_value());
}

// Those extensions at their defaults (what clients that always send them send) are accepted.
TEST(ChatRequest, VllmExtensionsAtTheirDefaultsAreAccepted) {
  EXPECT_NO_THROW(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": true,
          "continue_final_message": false, "echo": false, "min_tokens": 0, "guided_json": null,
          "include_stop_str_in_output": false, "tools": [], "functions": [],
          "bad_words": [], "structured_outputs": null, "tool_choice": "auto",
          "chat_template": null})"));
  EXPECT_NO_THROW(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none"})"));
  // Without tools nothing is parsed, whatever tool_choice says.
  EXPECT_FALSE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                      "tools": [], "tool_choice": "auto"})")
                   .parse_tool_calls);
  EXPECT_NO_THROW(parse_completion_request(
      R"({"prompt": "x", "min_tokens": 0, "guided_choice": null, "allowed_token_ids": []})"));
}

}  // namespace
}  // namespace headway::serving::http
