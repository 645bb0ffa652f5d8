// Generate end to end: a generated client stub against a real GrpcFrontend over the fake service.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "frontend_fixture.h"
#include "proto_conversion.h"

namespace headway::serving::testing {
namespace {

using GenerateTest = FrontendFixture;

TEST_F(GenerateTest, StreamsTokenIdsAndTextWithUsageAndTimingsOnTheLastMessage) {
  fake_.set_script({.tokens = {72, 105},
                    .finish = Finish::kLength,
                    .timings = {.queue_seconds = 0.25,
                                .ttft_seconds = 0.5,
                                .e2e_seconds = 1.5,
                                .kv_transfer_seconds = 0.125,
                                .kv_wait_seconds = 0.75,
                                .kv_moved = true,
                                .kv_cached_tokens = 64},
                    .cached_prompt_tokens = 2});
  v1::GenerateRequest request = token_request({1, 2, 3});
  request.set_request_id("r-1");
  request.mutable_sampling()->set_max_tokens(2);

  const GenerateResult result = generate(request);

  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_FALSE(result.messages.empty());
  EXPECT_EQ(result.token_ids(), (std::vector<int32_t>{72, 105}));
  EXPECT_EQ(result.text(), "Hi");
  const v1::GenerateResponse& last = result.messages.back();
  EXPECT_EQ(last.request_id(), "r-1");
  EXPECT_EQ(last.finish_reason(), "length");
  EXPECT_EQ(last.usage().prompt_tokens(), 3u);
  EXPECT_EQ(last.usage().completion_tokens(), 2u);
  EXPECT_EQ(last.usage().cached_prompt_tokens(), 2u);
  EXPECT_DOUBLE_EQ(last.timings().queue_seconds(), 0.25);
  EXPECT_DOUBLE_EQ(last.timings().ttft_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(last.timings().e2e_seconds(), 1.5);
  EXPECT_DOUBLE_EQ(last.timings().kv_transfer_seconds(), 0.125);
  EXPECT_DOUBLE_EQ(last.timings().kv_wait_seconds(), 0.75);
  EXPECT_TRUE(last.timings().kv_moved());
  EXPECT_EQ(last.timings().kv_cached_tokens(), 64u);
  EXPECT_TRUE(last.error().empty());

  const auto inputs = fake_.wait_for_submitted(1);
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].request_id, "r-1");
  EXPECT_EQ(inputs[0].prompt_kind, GenerateInput::PromptKind::kTokenIds);
  EXPECT_EQ(inputs[0].prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(inputs[0].max_tokens, 2u);
}

TEST_F(GenerateTest, SendsEachBatchOfTokensAsItArrives) {
  fake_.set_script({.finish = Finish::kNone});
  grpc::ClientContext context;
  const std::string id = "r-stream";
  v1::GenerateRequest request = token_request({7});
  request.set_request_id(id);
  auto reader = stub_->Generate(&context, request);
  ASSERT_EQ(fake_.wait_for_submitted(1).size(), 1u);

  fake_.push(id, {72});
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  EXPECT_EQ(first.request_id(), id);
  EXPECT_EQ(std::vector<int32_t>(first.token_ids().begin(), first.token_ids().end()),
            std::vector<int32_t>{72});
  EXPECT_EQ(first.text_delta(), "H");
  EXPECT_EQ(first.finish_reason(), "");
  EXPECT_FALSE(first.has_usage());
  EXPECT_FALSE(first.has_timings());

  fake_.push(id, {105, 33});
  fake_.finish(id, Finish::kStop);
  std::vector<v1::GenerateResponse> rest;
  v1::GenerateResponse response;
  while (reader->Read(&response)) rest.push_back(response);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(rest.empty());
  std::string text;
  for (const auto& message : rest) text += message.text_delta();
  EXPECT_EQ(text, "i!");
  EXPECT_EQ(rest.back().finish_reason(), "stop");
  EXPECT_EQ(rest.back().usage().completion_tokens(), 3u);
  for (size_t i = 0; i + 1 < rest.size(); ++i) EXPECT_EQ(rest[i].finish_reason(), "") << i;
}

TEST_F(GenerateTest, PassesEveryRequestFieldToTheService) {
  v1::GenerateRequest request;
  request.set_text("Hello");
  request.set_model("fake-model");
  request.set_priority(-2);
  request.set_request_class("short");
  request.set_truncate_prompt_tokens(-1);
  request.set_include_stop_str_in_output(true);
  request.set_skip_special_tokens(false);
  request.set_add_special_tokens(false);
  v1::SamplingParams& sampling = *request.mutable_sampling();
  sampling.set_temperature(0.75f);
  sampling.set_top_p(0.5f);
  sampling.set_top_k(40);
  sampling.set_min_p(0.05f);
  sampling.set_seed(1234);
  sampling.set_max_tokens(7);
  sampling.set_ignore_eos(true);
  sampling.add_stop("###");
  sampling.add_stop_token_ids(2);
  sampling.add_stop_token_ids(9);
  sampling.set_presence_penalty(0.5f);
  sampling.set_frequency_penalty(-0.25f);
  sampling.set_repetition_penalty(1.2f);
  sampling.set_min_tokens(3);
  sampling.set_logprobs(4);
  (*sampling.mutable_logit_bias())[17] = -4.5f;
  v1::TokenIds* word = sampling.add_bad_words_ids();
  word->add_ids(4);
  word->add_ids(5);
  sampling.add_bad_words_ids()->add_ids(6);
  ASSERT_TRUE(generate(request).status.ok());

  const GenerateInput input = fake_.wait_for_submitted(1).at(0);
  EXPECT_EQ(input.prompt_kind, GenerateInput::PromptKind::kText);
  EXPECT_EQ(input.prompt_text, "Hello");
  EXPECT_EQ(input.model, "fake-model");
  EXPECT_EQ(input.priority, -2);
  EXPECT_EQ(input.request_class, "short");
  EXPECT_EQ(input.truncate_prompt_tokens, -1);
  EXPECT_TRUE(input.include_stop_str_in_output);
  EXPECT_FALSE(input.skip_special_tokens);
  EXPECT_EQ(input.add_special_tokens, false);
  EXPECT_FLOAT_EQ(input.sampling.temperature, 0.75f);
  EXPECT_FLOAT_EQ(input.sampling.top_p, 0.5f);
  EXPECT_EQ(input.sampling.top_k, 40u);
  EXPECT_FLOAT_EQ(input.sampling.min_p, 0.05f);
  EXPECT_EQ(input.sampling.seed, 1234u);
  EXPECT_EQ(input.max_tokens, 7u);
  EXPECT_TRUE(input.sampling.ignore_eos);
  EXPECT_EQ(input.stop, std::vector<std::string>{"###"});
  EXPECT_EQ(input.sampling.stop_token_ids, (std::vector<int32_t>{2, 9}));
  EXPECT_FLOAT_EQ(input.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(input.sampling.frequency_penalty, -0.25f);
  EXPECT_FLOAT_EQ(input.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(input.sampling.min_tokens, 3u);
  EXPECT_EQ(input.sampling.logprobs, 4);
  EXPECT_EQ(input.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{17, -4.5f}}));
  EXPECT_EQ(input.sampling.bad_words_ids, (std::vector<std::vector<int32_t>>{{4, 5}, {6}}));
}

// An unset repetition_penalty is "off" (1), not proto3's 0, which the service would refuse.
TEST_F(GenerateTest, AnUnsetRepetitionPenaltyIsOff) {
  v1::GenerateRequest request;
  request.set_text("Hello");
  ASSERT_TRUE(generate(request).status.ok());
  const GenerateInput input = fake_.wait_for_submitted(1).at(0);
  EXPECT_FLOAT_EQ(input.sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(input.sampling.logprobs, -1);
  EXPECT_FALSE(input.sampling.uses_host_processing());
}

TEST_F(GenerateTest, PassesChatMessages) {
  v1::GenerateRequest request;
  auto* messages = request.mutable_chat();
  auto* system = messages->add_messages();
  system->set_role("system");
  system->set_content("Be brief.");
  auto* user = messages->add_messages();
  user->set_role("user");
  user->set_content("Hi?");
  ASSERT_TRUE(generate(request).status.ok());

  const GenerateInput input = fake_.wait_for_submitted(1).at(0);
  EXPECT_EQ(input.prompt_kind, GenerateInput::PromptKind::kChat);
  ASSERT_EQ(input.messages.size(), 2u);
  EXPECT_EQ(input.messages[0].role, "system");
  EXPECT_EQ(input.messages[0].content, "Be brief.");
  EXPECT_EQ(input.messages[1].role, "user");
  EXPECT_EQ(input.messages[1].content, "Hi?");
  EXPECT_TRUE(input.messages[1].fields_json.empty());
  EXPECT_TRUE(input.tools_json.empty());
  // Unset, add_generation_prompt is true, as vLLM's default.
  EXPECT_TRUE(input.add_generation_prompt);
  EXPECT_FALSE(input.continue_final_message);
}

// Tool calling over gRPC: the tools and a message's other fields travel as JSON text, for the
// chat template.
TEST_F(GenerateTest, PassesToolsAndMessageFields) {
  v1::GenerateRequest request;
  auto* messages = request.mutable_chat();
  messages->set_tools_json(R"([{"type": "function", "function": {"name": "f"}}])");
  messages->set_template_kwargs_json(R"({"enable_thinking": false})");
  messages->set_add_generation_prompt(false);
  messages->set_continue_final_message(true);
  request.set_add_special_tokens(true);
  auto* result = messages->add_messages();
  result->set_role("tool");
  result->set_content("21");
  result->set_fields_json(R"({"tool_call_id": "c1"})");
  ASSERT_TRUE(generate(request).status.ok());

  const GenerateInput input = fake_.wait_for_submitted(1).at(0);
  EXPECT_EQ(input.tools_json, R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(input.template_kwargs_json, R"({"enable_thinking": false})");
  EXPECT_FALSE(input.add_generation_prompt);
  EXPECT_TRUE(input.continue_final_message);
  EXPECT_EQ(input.add_special_tokens, true);
  ASSERT_EQ(input.messages.size(), 1u);
  EXPECT_EQ(input.messages[0].role, "tool");
  EXPECT_EQ(input.messages[0].fields_json, R"({"tool_call_id": "c1"})");
}

// Guided output crosses as the service's GuidedOutput, and back (a router sends its engine
// processes what its clients asked for).
TEST_F(GenerateTest, PassesGuidedOutputBothWays) {
  v1::GenerateRequest request = token_request({1});
  request.mutable_guided()->set_json_schema(R"({"type": "integer"})");
  request.mutable_guided()->set_field("guided_json");
  request.mutable_guided()->set_starts_after("</think>");
  request.mutable_guided()->set_reasoning_opener("<think>");
  ASSERT_TRUE(generate(request).status.ok());
  request = token_request({1});
  request.mutable_guided()->mutable_choice()->add_choices("yes");
  request.mutable_guided()->mutable_choice()->add_choices("no");
  ASSERT_TRUE(generate(request).status.ok());
  request = token_request({1});
  request.mutable_guided()->set_json_object(true);
  ASSERT_TRUE(generate(request).status.ok());
  ASSERT_TRUE(generate(token_request({1})).status.ok());
  request = token_request({1});
  request.mutable_guided()->set_regex("[0-9]+");
  ASSERT_TRUE(generate(request).status.ok());
  request = token_request({1});
  request.mutable_guided()->set_grammar("root ::= [0-9]+");
  ASSERT_TRUE(generate(request).status.ok());

  const std::vector<GenerateInput> inputs = fake_.wait_for_submitted(6);
  EXPECT_EQ(inputs[0].guided.kind, GuidedOutput::Kind::kJsonSchema);
  EXPECT_EQ(inputs[0].guided.schema_json, R"({"type": "integer"})");
  EXPECT_EQ(inputs[0].guided.field, "guided_json");
  EXPECT_EQ(inputs[0].guided.starts_after, "</think>");
  EXPECT_EQ(inputs[0].guided.reasoning_opener, "<think>");
  EXPECT_EQ(inputs[1].guided.kind, GuidedOutput::Kind::kChoice);
  EXPECT_EQ(inputs[1].guided.choices, (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(inputs[2].guided.kind, GuidedOutput::Kind::kJsonObject);
  EXPECT_EQ(inputs[3].guided.kind, GuidedOutput::Kind::kNone);
  EXPECT_EQ(inputs[4].guided.kind, GuidedOutput::Kind::kRegex);
  EXPECT_EQ(inputs[4].guided.regex, "[0-9]+");
  EXPECT_EQ(inputs[5].guided.kind, GuidedOutput::Kind::kGrammar);
  EXPECT_EQ(inputs[5].guided.grammar, "root ::= [0-9]+");
  for (const GenerateInput& input : inputs) {
    // No guided output is not sent at all (a router sets the message only for one).
    if (input.guided.kind == GuidedOutput::Kind::kNone) continue;
    v1::GuidedOutput wire;
    grpc_frontend::to_proto(input.guided, wire);
    const GuidedOutput back = grpc_frontend::from_proto(wire);
    EXPECT_EQ(back.kind, input.guided.kind);
    EXPECT_EQ(back.schema_json, input.guided.schema_json);
    EXPECT_EQ(back.choices, input.guided.choices);
    EXPECT_EQ(back.regex, input.guided.regex);
    EXPECT_EQ(back.grammar, input.guided.grammar);
    EXPECT_EQ(back.field, input.guided.field);
    EXPECT_EQ(back.starts_after, input.guided.starts_after);
    EXPECT_EQ(back.reasoning_opener, input.guided.reasoning_opener);
  }
}

TEST_F(GenerateTest, UnsetSamplingFieldsTakeTheServiceDefaultsNotProtoZeros) {
  ASSERT_TRUE(generate(token_request({1})).status.ok());
  const GenerateInput input = fake_.wait_for_submitted(1).at(0);
  EXPECT_FLOAT_EQ(input.sampling.top_p, 1.0f);              // proto3 would say 0, which is invalid
  EXPECT_EQ(input.max_tokens, GenerateInput{}.max_tokens);  // 16, not 0
  EXPECT_FLOAT_EQ(input.sampling.temperature, 0.0f);
  EXPECT_TRUE(input.skip_special_tokens);  // vLLM's default, not proto3's false
  // The prompt form's default (true for text, false for chat), which the service applies.
  EXPECT_EQ(input.add_special_tokens, std::nullopt);
}

// As over HTTP: requests without a seed must sample differently, so each gets its own random one;
// an explicit seed, 0 included, is kept.
TEST_F(GenerateTest, RequestsWithoutASeedGetDifferentRandomSeeds) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(generate(token_request({1})).status.ok());
  v1::GenerateRequest zero = token_request({1});
  zero.mutable_sampling()->set_seed(0);
  ASSERT_TRUE(generate(zero).status.ok());
  const std::vector<GenerateInput> inputs = fake_.wait_for_submitted(4);
  const std::set<uint64_t> seeds{inputs.at(0).sampling.seed, inputs.at(1).sampling.seed,
                                 inputs.at(2).sampling.seed};
  EXPECT_EQ(seeds.size(), 3u);
  EXPECT_EQ(inputs.at(3).sampling.seed, 0u);
}

TEST_F(GenerateTest, AnExplicitZeroMaxTokensReachesTheServiceToBeRefused) {
  v1::GenerateRequest request = token_request({1});
  request.mutable_sampling()->set_max_tokens(0);
  ASSERT_TRUE(generate(request).status.ok());
  EXPECT_EQ(fake_.wait_for_submitted(1).at(0).max_tokens, 0u);
}

// Refused by the frontend, not the service, but like the service's refusals: the message and the
// trailing metadata name the field, and the service counts it (headway_request_rejected_total).
TEST_F(GenerateTest, ARequestWithoutAPromptIsAnInvalidArgumentNamingIt) {
  const GenerateResult result = generate(v1::GenerateRequest{});
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(result.status.error_message().rfind("prompt: ", 0), 0u)
      << result.status.error_message();
  const auto param = result.trailing_metadata.find("headway-error-param");
  ASSERT_NE(param, result.trailing_metadata.end());
  EXPECT_EQ(param->second, "prompt");
  EXPECT_TRUE(result.messages.empty());
  EXPECT_TRUE(fake_.wait_for_submitted(0).empty());
  EXPECT_EQ(fake_.refused_by_frontend(), 1u);
}

// A message that names the field only further on still starts with it.
TEST_F(GenerateTest, ARefusalsMessageStartsWithTheFieldEvenWhenItNamesItLater) {
  fake_.fail_next_submit(
      ServiceError(ErrorCode::kInvalidArgument, "at most 4 stop strings are allowed", "stop"));
  const GenerateResult result = generate(token_request({1}));
  EXPECT_EQ(result.status.error_message(), "stop: at most 4 stop strings are allowed");
  EXPECT_EQ(fake_.refused_by_frontend(), 0u);  // the service counts its own refusals
}

// A status travels in the trailers, and a client refuses trailers past its metadata limit (8 KiB)
// with a RESOURCE_EXHAUSTED of its own: a long refusal is shortened so the client sees its code.
TEST_F(GenerateTest, ALongRefusalIsShortenedSoTheClientSeesItsCode) {
  fake_.fail_next_submit(
      ServiceError(ErrorCode::kNotFound, "model " + std::string(1 << 20, 'm'), "model"));
  const GenerateResult result = generate(token_request({1}));
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << result.status.error_message().substr(0, 200);
  EXPECT_LE(result.status.error_message().size(), 4096u + 32u);
  EXPECT_NE(result.status.error_message().find("(1048582 bytes)"), std::string::npos);
}

TEST_F(GenerateTest, AFailedRequestEndsWithFinishReasonErrorAndItsMessage) {
  fake_.set_script({.tokens = {65}, .finish = Finish::kError, .error = "engine 0 stopped"});
  const GenerateResult result = generate(token_request({1}));
  ASSERT_TRUE(result.status.ok());
  ASSERT_FALSE(result.messages.empty());
  EXPECT_EQ(result.messages.back().finish_reason(), "error");
  EXPECT_EQ(result.messages.back().error(), "engine 0 stopped");
  EXPECT_EQ(result.text(), "A");
}

struct StatusCase {
  ErrorCode service_code;
  grpc::StatusCode grpc_code;
};

class GenerateStatusTest : public FrontendFixture,
                           public ::testing::WithParamInterface<StatusCase> {};

TEST_P(GenerateStatusTest, ARefusedRequestGetsTheMappedCodeAndNamesTheField) {
  fake_.fail_next_submit(ServiceError(GetParam().service_code, "must be at least 1", "max_tokens"));
  const GenerateResult result = generate(token_request({1}));
  EXPECT_EQ(result.status.error_code(), GetParam().grpc_code);
  EXPECT_EQ(result.status.error_message(), "max_tokens: must be at least 1");
  EXPECT_TRUE(result.messages.empty());
  const auto param = result.trailing_metadata.find("headway-error-param");
  ASSERT_NE(param, result.trailing_metadata.end());
  EXPECT_EQ(param->second, "max_tokens");
}

INSTANTIATE_TEST_SUITE_P(
    EveryErrorCode, GenerateStatusTest,
    ::testing::Values(StatusCase{ErrorCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
                      StatusCase{ErrorCode::kNotFound, grpc::StatusCode::NOT_FOUND},
                      StatusCase{ErrorCode::kResourceExhausted,
                                 grpc::StatusCode::RESOURCE_EXHAUSTED},
                      StatusCase{ErrorCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
                      StatusCase{ErrorCode::kInternal, grpc::StatusCode::INTERNAL}));

// A guided message with none of its kinds set is refused, not run unguided.
TEST_F(GenerateTest, AGuidedMessageWithoutAKindIsAnInvalidArgumentNamingIt) {
  v1::GenerateRequest request = token_request({1});
  request.mutable_guided()->set_field("x");
  const GenerateResult result = generate(request);
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(result.status.error_message().rfind("guided: none of", 0), 0u)
      << result.status.error_message();
  EXPECT_TRUE(fake_.wait_for_submitted(0).empty());
}

// The service names a chat's JSON texts by their HTTP names; a gRPC client reads its own.
TEST_F(GenerateTest, RefusalsOfTheChatsJsonTextsNameTheProtoFields) {
  const struct {
    ServiceError error;
    std::string message, param;
  } cases[] = {
      {ServiceError(ErrorCode::kInvalidArgument,
                    "tools must be a JSON array nested at most 128 levels deep", "tools"),
       "tools_json must be a JSON array nested at most 128 levels deep", "tools_json"},
      {ServiceError(ErrorCode::kInvalidArgument,
                    "chat_template_kwargs.messages is set by the request itself",
                    "chat_template_kwargs.messages"),
       "template_kwargs_json.messages is set by the request itself",
       "template_kwargs_json.messages"},
      // Another name that starts with one of them is left alone.
      {ServiceError(ErrorCode::kInvalidArgument, "must be auto", "tools_choice"),
       "tools_choice: must be auto", "tools_choice"},
  };
  for (const auto& c : cases) {
    fake_.fail_next_submit(c.error);
    const GenerateResult result = generate(token_request({1}));
    EXPECT_EQ(result.status.error_message(), c.message);
    const auto param = result.trailing_metadata.find("headway-error-param");
    ASSERT_NE(param, result.trailing_metadata.end());
    EXPECT_EQ(param->second, c.param);
  }
}

TEST_F(GenerateTest, AMessageThatAlreadyNamesTheFieldIsNotPrefixedAgain) {
  fake_.fail_next_submit(
      ServiceError(ErrorCode::kNotFound, "model \"other\" is not served here", "model"));
  const GenerateResult result = generate(token_request({1}));
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(result.status.error_message(), "model \"other\" is not served here");
}

}  // namespace
}  // namespace headway::serving::testing
