// The frontend's non-streamed answers, its side routes and its life cycle, driven by cpp-httplib's
// client against a fake service.
#include <headway/core/error.h>

#include <algorithm>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

TEST_F(HttpFrontendTest, CompletionAnswersWithTextFinishAndUsage) {
  auto result = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 5})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
  const json body = json::parse(result->body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_TRUE(body["id"].get<std::string>().starts_with("cmpl-"));
  EXPECT_EQ(body["model"], FakeGenerationService::kModelName);
  EXPECT_TRUE(body["created"].is_number_integer());
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"], "abcde");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  ASSERT_TRUE(body["choices"][0].contains("stop_reason"));
  EXPECT_TRUE(body["choices"][0]["stop_reason"].is_null());
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 7},
                                 {"completion_tokens", 5},
                                 {"total_tokens", 12},
                                 {"prompt_tokens_details", {{"cached_tokens", 3}}}}));

  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].prompt_text, "hello");
  EXPECT_EQ(submitted[0].max_tokens, 5u);
  EXPECT_EQ(submitted[0].request_id, body["id"]);
}

// OpenAI's n: a request per choice, seeded seed + index, under ids of their own; one answer with
// the choices in order and the usage of all (the prompt counted once).
TEST_F(HttpFrontendTest, CompletionWithNAnswersEveryChoice) {
  auto result =
      post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 3, "n": 3, "seed": 10})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json body = json::parse(result->body);
  ASSERT_EQ(body["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(body["choices"][i]["index"], i);
    EXPECT_EQ(body["choices"][i]["text"], "abc");
    EXPECT_EQ(body["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 7},
                                 {"completion_tokens", 9},
                                 {"total_tokens", 16},
                                 {"prompt_tokens_details", {{"cached_tokens", 3}}}}));
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 3u);
  const std::string id = body["id"];
  EXPECT_TRUE(id.starts_with("cmpl-"));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(submitted[i].sampling.seed, 10u + i);
    EXPECT_EQ(submitted[i].request_id, id + "-" + std::to_string(i));
  }
}

// vLLM's add_special_tokens reaches the service for completions (every prompt of a batch) and
// chat; a non-boolean is a 400 naming it.
TEST_F(HttpFrontendTest, AddSpecialTokensReachesTheService) {
  auto completion =
      post_json("/v1/completions",
                R"({"prompt": ["hi", "yo"], "max_tokens": 2, "add_special_tokens": false})");
  ASSERT_TRUE(completion);
  ASSERT_EQ(completion->status, 200) << completion->body;
  auto chat = post_json("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}],
      "max_tokens": 2, "add_special_tokens": true})");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 3u);
  EXPECT_EQ(submitted[0].add_special_tokens, false);
  EXPECT_EQ(submitted[1].prompt_text, "yo");
  EXPECT_EQ(submitted[1].add_special_tokens, false);
  EXPECT_EQ(submitted[2].prompt_kind, GenerateInput::PromptKind::kChat);
  EXPECT_EQ(submitted[2].add_special_tokens, true);

  auto refused = post_json("/v1/completions", R"({"prompt": "hi", "add_special_tokens": "false"})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_EQ(error_of(refused->body)["param"], "add_special_tokens");
  EXPECT_EQ(service_.submitted().size(), 3u);
}

// A batch of prompts with n choices each: choice p * n + i answers prompt p with seed + i; the
// usage counts each prompt once.
TEST_F(HttpFrontendTest, ABatchOfPromptsAnswersNChoicesEach) {
  auto result = post_json("/v1/completions", R"({"prompt": ["one", [4, 5]], "max_tokens": 2,
      "n": 2, "seed": 3})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json body = json::parse(result->body);
  ASSERT_EQ(body["choices"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(body["choices"][i]["index"], i);
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 14},
                                 {"completion_tokens", 8},
                                 {"total_tokens", 22},
                                 {"prompt_tokens_details", {{"cached_tokens", 6}}}}));
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(submitted[i].sampling.seed, 3u + i % 2) << i;
    EXPECT_EQ(submitted[i].prompt_kind,
              i < 2 ? GenerateInput::PromptKind::kText : GenerateInput::PromptKind::kTokenIds)
        << i;
  }
  EXPECT_EQ(submitted[0].prompt_text, "one");
  EXPECT_EQ(submitted[3].prompt_ids, (std::vector<int32_t>{4, 5}));
}

// A prompt of a batch that the service refuses is named by its place in the batch.
TEST_F(HttpFrontendTest, ARefusedPromptOfABatchIsNamedByItsIndex) {
  service_.fail_submits_with(
      ServiceError(ErrorCode::kInvalidArgument, "the prompt is too long", "prompt"));
  auto result = post_json("/v1/completions", R"({"prompt": ["one", "two"]})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  const json error = error_of(result->body);
  EXPECT_EQ(error["param"], "prompt[0]");
  EXPECT_EQ(error["message"], "prompt[0]: the prompt is too long");
  // One prompt alone keeps the service's words.
  result = post_json("/v1/completions", R"({"prompt": "one"})");
  ASSERT_TRUE(result);
  EXPECT_EQ(error_of(result->body)["param"], "prompt");
  // A refusal that names a place within the prompt keeps it, within that prompt.
  service_.fail_submits_with(
      ServiceError(ErrorCode::kInvalidArgument,
                   "prompt[0]: token id 999 is outside the vocabulary [0, 320)", "prompt[0]"));
  result = post_json("/v1/completions", R"({"prompt": ["one", "two"]})");
  ASSERT_TRUE(result);
  EXPECT_EQ(error_of(result->body)["param"], "prompt[0][0]");
  EXPECT_EQ(error_of(result->body)["message"],
            "prompt[0][0]: token id 999 is outside the vocabulary [0, 320)");
}

// A choice that fails fails the answer, and the choices still running are aborted.
TEST_F(HttpFrontendTest, AFailedChoiceFailsTheAnswerAndAbortsTheOthers) {
  service_.set_finish(Finish::kError, "engine died");
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    auto result =
        post_json("/v1/chat/completions",
                  std::string(R"({"messages": [{"role": "user", "content": "x"}], )") +
                      R"("max_tokens": 2, "n": 2, "stream": )" + (stream ? "true" : "false") + "}");
    ASSERT_TRUE(result);
    const std::string second = service_.submitted().back().request_id;
    if (stream) {
      EXPECT_EQ(result->status, 200);
      EXPECT_NE(result->body.find("engine died"), std::string::npos) << result->body;
    } else {
      EXPECT_EQ(result->status, 500) << result->body;
    }
    const auto aborted = service_.aborted();
    EXPECT_NE(std::find(aborted.begin(), aborted.end(), second), aborted.end());
  }
}

// OpenAI's completions shape: each token's text, its logprob, the top tokens (and the generated
// one) keyed by text, and each token's offset in the text.
TEST_F(HttpFrontendTest, CompletionLogprobsListTokensTopTokensAndOffsets) {
  auto result =
      post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 3, "logprobs": 2})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json logprobs = json::parse(result->body)["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], json({"a", "b", "c"}));
  EXPECT_EQ(logprobs["token_logprobs"], json({-0.5, -0.5, -0.5}));
  EXPECT_EQ(logprobs["top_logprobs"][0], json({{"a", -0.5}, {"b", -0.75}}));
  EXPECT_EQ(logprobs["top_logprobs"][2], json({{"c", -0.5}, {"d", -0.75}}));
  EXPECT_EQ(logprobs["text_offset"], json({0, 1, 2}));
  EXPECT_EQ(service_.submitted().at(0).sampling.logprobs, 2);
  // As written, the most likely first (token 25 "z" before 26 "a"), and OpenAI's key order.
  result = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 26, "logprobs": 2})");
  ASSERT_TRUE(result);
  EXPECT_TRUE(result->body.starts_with(R"({"id":)")) << result->body;
  EXPECT_NE(result->body.find(R"({"z":-0.5,"a":-0.75})"), std::string::npos) << result->body;
}

// OpenAI's chat shape: token, logprob, bytes and exactly top_logprobs entries of the same.
TEST_F(HttpFrontendTest, ChatLogprobsCarryBytesAndTopLogprobs) {
  auto result = post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "hi"}], "max_tokens": 2, "logprobs": true, "top_logprobs": 1})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json content = json::parse(result->body)["choices"][0]["logprobs"]["content"];
  const json a = {{"token", "a"}, {"logprob", -0.5}, {"bytes", {97}}};
  json first = a;
  first["top_logprobs"] = json::array({a});
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0], first);
  EXPECT_EQ(content[1]["token"], "b");
  // Without top_logprobs: the generated token's alone.
  result = post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "hi"}], "max_tokens": 1, "logprobs": true})");
  ASSERT_TRUE(result);
  EXPECT_EQ(json::parse(result->body)["choices"][0]["logprobs"]["content"][0]["top_logprobs"],
            json::array());
}

TEST_F(HttpFrontendTest, CompletionPassesSamplingAndExtensionsToTheService) {
  auto result = post_json("/v1/completions", R"({"model": "fake-model", "prompt": [3, 4],
      "temperature": 0, "top_p": 0.5, "top_k": 8, "min_p": 0.1, "seed": 99, "ignore_eos": true,
      "stop": ["x", "yz"], "priority": 2, "request_class": "batch", "max_tokens": 2})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  const GenerateInput& input = submitted[0];
  EXPECT_EQ(input.model, "fake-model");
  EXPECT_EQ(input.prompt_kind, GenerateInput::PromptKind::kTokenIds);
  EXPECT_EQ(input.prompt_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_FLOAT_EQ(input.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(input.sampling.top_p, 0.5f);
  EXPECT_EQ(input.sampling.top_k, 8u);
  EXPECT_FLOAT_EQ(input.sampling.min_p, 0.1f);
  EXPECT_EQ(input.sampling.seed, 99u);
  EXPECT_TRUE(input.sampling.ignore_eos);
  EXPECT_EQ(input.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(input.priority, 2);
  EXPECT_EQ(input.request_class, "batch");
}

TEST_F(HttpFrontendTest, StopFinishIsReportedAsStop) {
  service_.set_finish(Finish::kStop);
  auto result = post_json("/v1/completions", R"({"prompt": "x", "max_tokens": 10})");
  ASSERT_TRUE(result);
  const json body = json::parse(result->body);
  EXPECT_EQ(body["choices"][0]["text"], "abc");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(body["choices"][0]["stop_reason"].is_null());  // EOS, as vLLM reports it
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
}

// vLLM's stop_reason names the stop_token_ids entry that ended the request, whole or streamed.
TEST_F(HttpFrontendTest, AStopTokenIsNamedInStopReason) {
  service_.set_finish(Finish::kStop);  // the fake answers ids 0, 1, 2 ("abc")
  auto whole = post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "x"}], "stop_token_ids": [2]})");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json body = json::parse(whole->body);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "ab");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["stop_reason"], 2);

  auto streamed =
      post_json("/v1/completions", R"({"prompt": "x", "stop_token_ids": [2], "stream": true})");
  ASSERT_TRUE(streamed);
  std::vector<json> choices;
  for (const auto& payload : sse_data(streamed->body)) {
    if (payload != "[DONE]") choices.push_back(json::parse(payload)["choices"][0]);
  }
  ASSERT_FALSE(choices.empty()) << streamed->body;
  for (size_t i = 0; i + 1 < choices.size(); ++i) {
    EXPECT_TRUE(choices[i]["stop_reason"].is_null()) << choices[i];
  }
  EXPECT_EQ(choices.back()["finish_reason"], "stop");
  EXPECT_EQ(choices.back()["stop_reason"], 2);
}

TEST_F(HttpFrontendTest, ChatAnswersWithAnAssistantMessage) {
  auto result = post_json("/v1/chat/completions", R"({"messages": [
      {"role": "system", "content": "terse"},
      {"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 3})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json body = json::parse(result->body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_TRUE(body["id"].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_EQ(body["choices"][0]["message"], json({{"role", "assistant"}, {"content", "abc"}}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["total_tokens"], 10);

  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].prompt_kind, GenerateInput::PromptKind::kChat);
  ASSERT_EQ(submitted[0].messages.size(), 2u);
  EXPECT_EQ(submitted[0].messages[1].role, "user");
  EXPECT_EQ(submitted[0].messages[1].content, "hi");
}

TEST_F(HttpFrontendTest, ChatWithoutALimitAsksForTheWholeContext) {
  service_.set_finish(Finish::kStop);  // the fake then stops after 3 tokens
  auto result =
      post_json("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_TRUE(service_.submitted().at(0).max_tokens_to_context_end);
}

TEST_F(HttpFrontendTest, ModelsListsTheServedModel) {
  auto result = client().Get("/v1/models");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  const json body = json::parse(result->body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], FakeGenerationService::kModelName);
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(body["data"][0]["max_model_len"], FakeGenerationService::kMaxModelLen);
  // What `headway bench` draws its prompt ids below (the fake's byte vocabulary).
  EXPECT_EQ(body["data"][0]["vocab_size"], 256);
}

// vLLM's route; the release is the project's (CMake's PROJECT_VERSION, as `headway --version`).
TEST_F(HttpFrontendTest, VersionSaysTheRelease) {
  auto reply = client().Get("/version");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(json::parse(reply->body), json({{"version", HEADWAY_PROJECT_VERSION}}));
  auto posted = client().Post("/version", "{}", "application/json");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 405);
}

TEST_F(HttpFrontendTest, HealthFollowsTheService) {
  auto ok = client().Get("/health");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["status"], "ok");
  service_.set_serving(false);
  auto down = client().Get("/health");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 503);
  EXPECT_EQ(json::parse(down->body)["status"], "unavailable");
  EXPECT_EQ(json::parse(down->body)["reason"], "no engine is alive (0 of 1)");
  EXPECT_FALSE(json::parse(ok->body).contains("reason"));
}

TEST_F(HttpFrontendTest, MetricsServesTheServiceText) {
  service_.set_metrics("# TYPE x gauge\nx 42\n");
  auto result = client().Get("/metrics");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  // The service's, then the frontend's own: its kept responses.
  EXPECT_TRUE(result->body.starts_with("# TYPE x gauge\nx 42\n")) << result->body;
  EXPECT_NE(result->body.find("\nheadway_responses_kept 0\n"), std::string::npos) << result->body;
  EXPECT_NE(result->body.find("\nheadway_responses_pushed_out_total 0\n"), std::string::npos)
      << result->body;
}

TEST_F(HttpFrontendTest, ApiKeyIsRequiredEverywhereButHealth) {
  start_frontend("s3cret");
  auto none = post_json("/v1/completions", R"({"prompt": "x"})");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(error_of(none->body)["type"], "authentication_error");
  EXPECT_NE(error_of(none->body)["message"].get<std::string>().find("missing"), std::string::npos);

  auto wrong =
      post_json("/v1/completions", R"({"prompt": "x"})", {{"Authorization", "Bearer s3cre"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_NE(error_of(wrong->body)["message"].get<std::string>().find("invalid"), std::string::npos);

  auto not_bearer = client().Get("/v1/models", {{"Authorization", "Basic s3cret"}});
  ASSERT_TRUE(not_bearer);
  EXPECT_EQ(not_bearer->status, 401);
  auto metrics = client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 401);
  auto version = client().Get("/version");
  ASSERT_TRUE(version);
  EXPECT_EQ(version->status, 401);
  EXPECT_TRUE(service_.submitted().empty());
  // Each counts as headway_request_rejected_total{reason="unauthorized"} (none did: helper-130).
  EXPECT_EQ(service_.unauthorized(), 5u);

  auto right =
      post_json("/v1/completions", R"({"prompt": "x"})", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  auto lower_case_scheme = client().Get("/v1/models", {{"Authorization", "bearer s3cret"}});
  ASSERT_TRUE(lower_case_scheme);
  EXPECT_EQ(lower_case_scheme->status, 200);
  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(service_.unauthorized(), 5u);
}

// A chunked body, which cpp-httplib 0.11 would read without the 32 MiB limit (and before the
// handler checks the API key: a 1.5 GB one took the server to 2.9 GB), is refused from its headers
// with 411, and the connection closes once the answer is out: a client streaming on gets reset
// instead of being read.
TEST_F(HttpFrontendTest, AChunkedBodyIsRefusedFromItsHeaders) {
  start_frontend("s3cret");
  RawConnection chunked(port());
  chunked.send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  const std::string answer = chunked.read_until("\"code\":411}}");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 411")) << answer;
  EXPECT_NE(answer.find("send it with a Content-Length"), std::string::npos) << answer;
  bool closed = false;
  for (int mb = 0; mb < 256 && !closed; ++mb) {
    closed = !chunked.send_unless_closed(std::string(1 << 20, 'a'));
  }
  EXPECT_TRUE(closed) << "the server read 256 MB of a refused body";
  EXPECT_TRUE(service_.submitted().empty());
  auto right =
      post_json("/v1/completions", R"({"prompt": "x"})", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
}

// Two Content-Length values frame the body two ways (cpp-httplib read the first, a proxy may read
// the other: helper-130's walk got 200 for "29" then "5"): refused with 400, connection closed.
TEST_F(HttpFrontendTest, ConflictingContentLengthsAreRefused) {
  const std::string body = R"({"prompt": "x"})";
  for (const std::string lengths :
       {"Content-Length: 15\r\nContent-Length: 5\r\n", "Content-Length: 15, 5\r\n",
        "Content-Length: 15\r\nContent-Length: 15\r\n"}) {
    SCOPED_TRACE(lengths);
    RawConnection connection(port());
    connection.send(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + lengths +
        "\r\n" + body);
    const std::string answer = connection.read_until("\"code\":400}}");
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 400")) << answer;
    EXPECT_NE(answer.find("more than one Content-Length"), std::string::npos) << answer;
  }
  EXPECT_TRUE(service_.submitted().empty());
}

// cpp-httplib applied a Range header to generated answers: a completion cut to 21 bytes of JSON.
TEST_F(HttpFrontendTest, ARangeHeaderDoesNotCutAnAnswer) {
  auto result = post_json("/v1/completions", R"({"prompt": "x", "max_tokens": 2})",
                          {{"Range", "bytes=0-20"}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_FALSE(result->has_header("Content-Range"));
  EXPECT_TRUE(json::accept(result->body)) << result->body;
}

TEST_F(HttpFrontendTest, ABusyPortIsAnErrorNamingHostAndPort) {
  HttpOptions options;
  options.port = port();
  HttpFrontend second(service_, options);
  try {
    second.start();
    FAIL() << "a second frontend bound the same port";
  } catch (const core::Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("127.0.0.1:" + std::to_string(port()) + ": the port is in use"),
              std::string::npos)
        << error.what();
  }
  // The first one still serves.
  auto result = client().Get("/health");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
}

TEST_F(HttpFrontendTest, StartTwiceIsRefusedAndStopIsIdempotent) {
  EXPECT_THROW(frontend_->start(), core::Error);
  frontend_->stop();
  frontend_->stop();
  auto result = client().Get("/health");
  EXPECT_FALSE(result);  // nothing listens any more
}

TEST(HttpFrontendLifecycle, StopsWithoutEverStarting) {
  FakeGenerationService service;
  HttpFrontend frontend(service, HttpOptions{});
  EXPECT_EQ(frontend.port(), 0);
  frontend.stop();
}

TEST_F(HttpFrontendTest, KeepAliveConnectionServesManyRequests) {
  httplib::Client keep = client();
  keep.set_keep_alive(true);
  for (int i = 0; i < 20; ++i) {
    auto result =
        keep.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 1})", "application/json");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 200);
  }
  EXPECT_EQ(service_.submitted().size(), 20u);
}

}  // namespace
}  // namespace headway::serving::testing
