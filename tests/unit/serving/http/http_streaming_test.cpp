// Server-Sent Event streams: their chunks, usage, error events, and that a client which goes away
// (streamed or not) or a frontend that stops aborts the request in the service.
#include <chrono>
#include <map>
#include <thread>
#include <utility>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

// Opens a streamed completion with n = 2 on `connection`; the ids of its two requests, or empty
// ones when they never arrived (the caller asserts).
std::pair<std::string, std::string> open_two_choices(FakeGenerationService& service,
                                                     RawConnection& connection) {
  const std::string first = open_stream(service, connection, "/v1/completions",
                                        R"({"prompt": "x", "stream": true, "n": 2})");
  if (first.empty() || !service.wait_for_submits(2, kPatienceSeconds)) return {};
  return {first, service.submitted()[1].request_id};
}

// Ends held stream `id` with finish reason "length" and reads the response to its [DONE]; the
// finish is there.
void finish_with_length(FakeGenerationService& service, RawConnection& connection,
                        const std::string& id) {
  service.finish(id, Finish::kLength);
  const std::string all = connection.read_until("data: [DONE]");
  EXPECT_NE(all.find("\"finish_reason\":\"length\""), std::string::npos) << all;
  EXPECT_NE(all.find("data: [DONE]"), std::string::npos) << all;
}

TEST_F(HttpFrontendTest, CompletionStreamSendsDeltasFinishUsageAndDone) {
  auto result = post_json("/v1/completions", R"({"prompt": "x", "max_tokens": 4, "stream": true,
                                                 "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "text/event-stream");
  const auto data = sse_data(result->body);
  ASSERT_GE(data.size(), 3u) << result->body;
  EXPECT_EQ(data.back(), "[DONE]");
  const auto events = json_events(data);

  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json& event = events[i];
    EXPECT_EQ(event["object"], "text_completion");
    EXPECT_TRUE(event["id"].get<std::string>().starts_with("cmpl-"));
    EXPECT_TRUE(event.contains("usage") && event["usage"].is_null()) << event;
    text += event["choices"][0]["text"].get<std::string>();
    const bool last_choice = i + 2 == events.size();
    EXPECT_EQ(event["choices"][0]["finish_reason"], last_choice ? json("length") : json(nullptr));
  }
  EXPECT_EQ(text, "abcd");
  const json& usage = events.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], json({{"prompt_tokens", 7},
                                  {"completion_tokens", 4},
                                  {"total_tokens", 11},
                                  {"prompt_tokens_details", {{"cached_tokens", 3}}}}));
}

// vLLM's continuous_usage_stats: every chunk carries the usage so far (the chat role chunk none
// generated yet), then the usage chunk as usual.
TEST_F(HttpFrontendTest, ContinuousUsageStatsPutTheUsageSoFarOnEveryChunk) {
  service_.set_hold(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/chat/completions",
                  R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
          "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  ASSERT_FALSE(id.empty());
  service_.push(id, 2);
  connection.read_until("\"content\":\"ab\"");
  service_.push(id, 1);
  connection.read_until("\"content\":\"c\"");
  service_.finish(id, Finish::kLength);
  const std::string all = connection.read_until("data: [DONE]");
  std::vector<std::string> data;
  for (size_t at = all.find("data: "); at != std::string::npos; at = all.find("data: ", at + 1)) {
    data.push_back(all.substr(at + 6, all.find("\n\n", at) - at - 6));
  }
  const auto events = json_events(data);
  ASSERT_GE(events.size(), 4u) << all;
  std::vector<uint32_t> completion;
  for (const json& event : events) {
    ASSERT_TRUE(event.contains("usage") && event["usage"].is_object()) << event;
    EXPECT_EQ(event["usage"]["prompt_tokens"], 7) << event;
    completion.push_back(event["usage"]["completion_tokens"].get<uint32_t>());
  }
  EXPECT_EQ(completion.front(), 0u);  // the role chunk
  EXPECT_EQ(completion[1], 2u);       // "ab"
  EXPECT_EQ(completion[2], 3u);       // "c"
  EXPECT_EQ(completion.back(), 3u);   // the usage chunk
  EXPECT_TRUE(events.back()["choices"].empty());
}

TEST_F(HttpFrontendTest, StreamWithoutIncludeUsageHasNoUsage) {
  auto result = post_json("/v1/completions", R"({"prompt": "x", "max_tokens": 2, "stream": true})");
  ASSERT_TRUE(result);
  const auto events = json_events(sse_data(result->body));
  ASSERT_FALSE(events.empty());
  for (const json& event : events) {
    EXPECT_FALSE(event.contains("usage")) << event;
    EXPECT_EQ(event["choices"].size(), 1u);
  }
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
}

TEST_F(HttpFrontendTest, ChatStreamOpensWithTheRoleThenContentThenFinish) {
  service_.set_finish(Finish::kStop);
  auto result = post_json("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
                              "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(result);
  const auto data = sse_data(result->body);
  ASSERT_EQ(data.back(), "[DONE]");
  const auto events = json_events(data);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["object"], "chat.completion.chunk");
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  json finish = nullptr;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    const json& delta = events[i]["choices"][0]["delta"];
    EXPECT_FALSE(delta.contains("role"));
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!events[i]["choices"][0]["finish_reason"].is_null()) {
      finish = events[i]["choices"][0]["finish_reason"];
    }
  }
  EXPECT_EQ(content, "abc");
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 3);
}

TEST_F(HttpFrontendTest, FailedStreamEndsWithAnErrorEventThenDone) {
  service_.set_finish(Finish::kError, "engine 1 lost");
  auto result = post_json("/v1/completions", R"({"prompt": "x", "stream": true})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);  // the stream had begun: the failure travels inside it
  const auto data = sse_data(result->body);
  ASSERT_GE(data.size(), 2u);
  EXPECT_EQ(data.back(), "[DONE]");
  const json error = error_of(data[data.size() - 2]);
  EXPECT_EQ(error["code"], 500);
  EXPECT_NE(error["message"].get<std::string>().find("engine 1 lost"), std::string::npos);
  EXPECT_TRUE(service_.aborted().empty());  // it ended in the service already
}

// HTTP/1.0 has no chunked encoding (ApacheBench speaks only 1.0): the events come as a plain body
// that the closing connection ends.
TEST_F(HttpFrontendTest, Http10StreamIsAPlainBodyEndedByClose) {
  const std::string body = R"({"prompt": "x", "max_tokens": 3, "stream": true})";
  const std::string reply = raw_exchange(
      port(), "POST /v1/completions HTTP/1.0\r\nContent-Length: " + std::to_string(body.size()) +
                  "\r\n\r\n" + body);
  const size_t header_end = reply.find("\r\n\r\n");
  ASSERT_NE(header_end, std::string::npos) << reply;
  const std::string headers = reply.substr(0, header_end);
  EXPECT_NE(headers.find(" 200 "), std::string::npos) << headers;
  EXPECT_EQ(headers.find("Transfer-Encoding"), std::string::npos) << headers;
  EXPECT_NE(headers.find("Connection: close"), std::string::npos) << headers;
  // Unchunked: the body is the events themselves, with no chunk-size lines between them.
  const std::string events = reply.substr(header_end + 4);
  ASSERT_TRUE(events.starts_with("data: {")) << events;
  EXPECT_TRUE(events.ends_with("data: [DONE]\n\n")) << events;
  std::string text;
  for (const auto& payload : sse_data(events)) {
    if (payload == "[DONE]") continue;
    text += nlohmann::json::parse(payload)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "abc");
  EXPECT_TRUE(service_.aborted().empty());
}

// HTTP/1.0 with keep-alive (`ab -k`): cpp-httplib keeps the connection after the body, so the
// events come as one body with a Content-Length, and the connection serves the next request.
TEST_F(HttpFrontendTest, Http10KeepAliveStreamIsOneBodyWithALength) {
  auto request = [](const std::string& body) {
    return "POST /v1/completions HTTP/1.0\r\nConnection: Keep-Alive\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  RawConnection connection(port());
  connection.send(request(R"({"prompt": "x", "max_tokens": 3, "stream": true})"));
  const std::string first = connection.read_until("data: [DONE]\n\n");
  const size_t header_end = first.find("\r\n\r\n");
  ASSERT_NE(header_end, std::string::npos) << first;
  const std::string headers = first.substr(0, header_end);
  EXPECT_EQ(headers.find("Transfer-Encoding"), std::string::npos) << headers;
  EXPECT_NE(headers.find("Content-Length: "), std::string::npos) << headers;
  std::string text;
  for (const auto& payload : sse_data(first.substr(header_end + 4))) {
    if (payload == "[DONE]") continue;
    text += nlohmann::json::parse(payload)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "abc");
  // The same connection takes the next request (only this one asks for usage).
  connection.send(request(R"({"prompt": "x", "max_tokens": 2, "stream": true,
                             "stream_options": {"include_usage": true}})"));
  EXPECT_NE(connection.read_until("\"prompt_tokens\"").find("\"prompt_tokens\""),
            std::string::npos);
  EXPECT_TRUE(service_.aborted().empty());
}

// From helper-200's review: the HTTP/1.0 keep-alive stream above writes nothing until generation
// ends, so no failed write finds its client gone; it ran to max_tokens for nobody. Its socket is
// looked at, as for a response that does not stream.
TEST_F(HttpFrontendTest, AnHttp10KeepAliveStreamWhoseClientWentAwayIsAborted) {
  service_.set_hold(true);
  const std::string body = R"({"prompt": "x", "stream": true})";
  std::string id;
  {
    RawConnection connection(port());
    const size_t before = service_.submitted().size();
    connection.send("POST /v1/completions HTTP/1.0\r\nConnection: Keep-Alive\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body);
    ASSERT_TRUE(service_.wait_for_submits(before + 1, kPatienceSeconds));
    id = service_.submitted()[before].request_id;
  }  // closed
  EXPECT_TRUE(service_.wait_for_abort(id, kPatienceSeconds));
}

TEST_F(HttpFrontendTest, HeldStreamDeliversTokensAsTheyArrive) {
  service_.set_hold(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/completions", R"({"prompt": "x", "stream": true})");
  ASSERT_FALSE(id.empty());

  service_.push(id, 2);
  EXPECT_NE(connection.read_until("\"text\":\"ab\"").find("\"text\":\"ab\""), std::string::npos);
  service_.push(id, 1);
  EXPECT_NE(connection.read_until("\"text\":\"c\"").find("\"text\":\"c\""), std::string::npos);
  finish_with_length(service_, connection, id);
  EXPECT_TRUE(service_.aborted().empty());
}

// n choices stream together: each opens with its role chunk, carries its own index and finish, and
// one usage chunk covers them all.
TEST_F(HttpFrontendTest, ChatStreamWithNInterleavesItsChoices) {
  auto result = post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "x"}], "max_tokens": 3, "n": 2, "stream": true,
      "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const auto data = sse_data(result->body);
  ASSERT_EQ(data.back(), "[DONE]");
  const auto events = json_events(data);
  std::map<int, std::string> text;
  std::map<int, int> roles;
  std::map<int, int> finishes;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json& choice = events[i]["choices"].at(0);
    const int index = choice["index"];
    if (choice["delta"].contains("role")) ++roles[index];
    if (choice["delta"].contains("content")) text[index] += choice["delta"]["content"];
    if (!choice["finish_reason"].is_null()) ++finishes[index];
  }
  EXPECT_EQ(roles, (std::map<int, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(text, (std::map<int, std::string>{{0, "abc"}, {1, "abc"}}));
  EXPECT_EQ(finishes, (std::map<int, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(events.back()["usage"], json({{"prompt_tokens", 7},
                                          {"completion_tokens", 6},
                                          {"total_tokens", 13},
                                          {"prompt_tokens_details", {{"cached_tokens", 3}}}}));
}

// Each choice's tokens go out as they come, whichever choice they belong to; a choice that ends
// leaves the stream open for the others, and [DONE] follows the last.
TEST_F(HttpFrontendTest, StreamedChoicesGoOutAsTheirTokensCome) {
  service_.set_hold(true);
  RawConnection connection(port());
  const auto [first, second] = open_two_choices(service_, connection);
  ASSERT_FALSE(second.empty());
  service_.push(second, 2);
  std::string seen = connection.read_until("\"text\":\"ab\"");
  EXPECT_NE(seen.find("\"index\":1"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("\"index\":0"), std::string::npos) << seen;
  service_.finish(second, Finish::kLength);
  seen = connection.read_until("\"finish_reason\":\"length\"");
  EXPECT_EQ(seen.find("[DONE]"), std::string::npos) << seen;
  service_.push(first, 1);
  seen = connection.read_until("\"text\":\"a\"");
  EXPECT_NE(seen.find("\"index\":0"), std::string::npos) << seen;
  finish_with_length(service_, connection, first);
  EXPECT_TRUE(service_.aborted().empty());
}

// Each chunk carries the logprobs of its tokens; a token without text still makes a chunk (its
// logprobs must go out), and the text offsets run on across chunks.
TEST_F(HttpFrontendTest, StreamedLogprobsFollowTheTokensAcrossChunks) {
  service_.set_hold(true);
  RawConnection connection(port());
  const std::string id = open_stream(service_, connection, "/v1/completions",
                                     R"({"prompt": "x", "stream": true, "logprobs": 0})");
  ASSERT_FALSE(id.empty());
  service_.push(id, 2);
  std::string seen = connection.read_until("\"text_offset\":[0,1]");
  EXPECT_NE(seen.find("\"tokens\":[\"a\",\"b\"]"), std::string::npos) << seen;
  service_.push_textless(id, 1);
  seen = connection.read_until("\"tokens\":[\"\"]");
  EXPECT_NE(seen.find("\"text_offset\":[2]"), std::string::npos) << seen;
  service_.push(id, 1);
  seen = connection.read_until("\"tokens\":[\"c\"]");
  EXPECT_NE(seen.find("\"text_offset\":[2]"), std::string::npos) << seen;
  finish_with_length(service_, connection, id);
}

// Behind a router the engine process may refuse a streamed request after submit: the response
// waits for the admission, so the client gets the refusal's status (429 for a full queue, which
// OpenAI clients retry after a back-off), not a 200 stream with an error event.
TEST_F(HttpFrontendTest, AStreamRefusedBeforeItsAdmissionGetsTheRefusalsStatus) {
  service_.set_hold(true);
  service_.set_admission_pending(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/completions", R"({"prompt": "x", "stream": true})");
  ASSERT_FALSE(id.empty());
  service_.refuse(id, ServiceError(ErrorCode::kResourceExhausted, "engine0's queue is full"));
  const std::string all = connection.read_until("is full");
  EXPECT_EQ(all.rfind("HTTP/1.1 429", 0), 0u) << all;
  EXPECT_NE(all.find("rate_limit_error"), std::string::npos) << all;
  EXPECT_EQ(all.find("text/event-stream"), std::string::npos) << all;
}

// With several choices, a refusal of any is answered at once, whatever the others still wait for,
// and the others are aborted.
TEST_F(HttpFrontendTest, ARefusedChoiceIsAnsweredWhileTheOthersAwaitAdmission) {
  service_.set_hold(true);
  service_.set_admission_pending(true);
  RawConnection connection(port());
  const auto [first, second] = open_two_choices(service_, connection);
  ASSERT_FALSE(second.empty());
  service_.refuse(second, ServiceError(ErrorCode::kResourceExhausted, "engine0's queue is full"));
  const std::string all = connection.read_until("is full");
  EXPECT_EQ(all.rfind("HTTP/1.1 429", 0), 0u) << all;
  EXPECT_TRUE(service_.wait_for_abort(first, kPatienceSeconds));
}

// A client that leaves while its stream waits for admission (nothing written yet) is found by
// looking at its connection, and the request is aborted.
TEST_F(HttpFrontendTest, AStreamWhoseClientLeftBeforeItsAdmissionIsAborted) {
  service_.set_hold(true);
  service_.set_admission_pending(true);
  std::string id;
  {
    RawConnection connection(port());
    id = open_stream(service_, connection, "/v1/completions", R"({"prompt": "x", "stream": true})");
    ASSERT_FALSE(id.empty());
  }  // closed
  EXPECT_TRUE(service_.wait_for_abort(id, kPatienceSeconds));
}

TEST_F(HttpFrontendTest, AStreamAdmittedLaterIsSentAsUsual) {
  service_.set_hold(true);
  service_.set_admission_pending(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/completions", R"({"prompt": "x", "stream": true})");
  ASSERT_FALSE(id.empty());
  service_.admit(id);
  service_.push(id, 2);
  const std::string first = connection.read_until("\"text\":\"ab\"");
  EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  finish_with_length(service_, connection, id);
}

// vLLM's return_token_ids: every chunk names its tokens, and tokens without text (ids outside the
// tokenizer, as with random weights) still make a chunk, so a client can count them.
TEST_F(HttpFrontendTest, ReturnTokenIdsStreamsEveryTokenEvenWithoutText) {
  service_.set_hold(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/completions",
                  R"({"prompt": "x", "stream": true, "return_token_ids": true})");
  ASSERT_FALSE(id.empty());

  service_.push(id, 2);
  const std::string letters = connection.read_until("\"token_ids\":[0,1]");
  EXPECT_NE(letters.find("\"text\":\"ab\",\"token_ids\":[0,1]"), std::string::npos) << letters;
  service_.push_textless(id, 3);
  const std::string textless = connection.read_until("\"token_ids\":[1000,1001,1002]");
  EXPECT_NE(textless.find("\"text\":\"\",\"token_ids\":[1000,1001,1002]"), std::string::npos)
      << textless;
  finish_with_length(service_, connection, id);
}

TEST_F(HttpFrontendTest, WithoutReturnTokenIdsTokensWithoutTextMakeNoChunk) {
  service_.set_hold(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/completions", R"({"prompt": "x", "stream": true})");
  ASSERT_FALSE(id.empty());
  service_.push_textless(id, 2);
  service_.push(id, 1);
  service_.finish(id, Finish::kLength);
  const std::string all = connection.read_until("data: [DONE]");
  EXPECT_EQ(all.find("token_ids"), std::string::npos) << all;
  // One chunk with the letter, one (empty) with the finish; none for the textless ids.
  const size_t letter = all.find("\"text\":\"a\"");
  ASSERT_NE(letter, std::string::npos) << all;
  EXPECT_EQ(all.find("\"text\":\"\""), all.rfind("\"text\":\"\"")) << all;
  EXPECT_GT(all.find("\"text\":\"\""), letter) << all;
}

TEST_F(HttpFrontendTest, ReturnTokenIdsInAWholeCompletion) {
  auto result =
      post_json("/v1/completions", R"({"prompt": "x", "max_tokens": 4, "return_token_ids": true})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json body = json::parse(result->body);
  EXPECT_EQ(body["choices"][0]["text"], "abcd");
  EXPECT_EQ(body["choices"][0]["token_ids"], json({0, 1, 2, 3}));
}

// vLLM's return_token_ids also gives the prompt as run: on each completions choice (its prompt's),
// beside a chat answer's choices; the fake tokenizes a text by its bytes.
TEST_F(HttpFrontendTest, ReturnTokenIdsGivesEachPromptsIdsAsRun) {
  auto batch = post_json("/v1/completions", R"({"prompt": ["ab", [5, 6]], "max_tokens": 2,
      "n": 2, "return_token_ids": true})");
  ASSERT_TRUE(batch);
  ASSERT_EQ(batch->status, 200) << batch->body;
  const json choices = json::parse(batch->body)["choices"];
  ASSERT_EQ(choices.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(choices[i]["prompt_token_ids"], i < 2 ? json({97, 98}) : json({5, 6})) << i;
  }
  EXPECT_FALSE(json::parse(batch->body).contains("prompt_token_ids"));
  for (const GenerateInput& input : service_.submitted()) EXPECT_TRUE(input.return_prompt_ids);

  auto chat = post_json("/v1/chat/completions",
                        R"({"messages": [{"role": "system", "content": "s"},
                                         {"role": "user", "content": "u"}],
                            "max_tokens": 2, "return_token_ids": true})");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const json answer = json::parse(chat->body);
  EXPECT_EQ(answer["prompt_token_ids"], json({0, 1}));
  EXPECT_FALSE(answer["choices"][0].contains("prompt_token_ids"));

  auto plain = post_json("/v1/completions", R"({"prompt": "ab", "max_tokens": 2})");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->body.find("prompt_token_ids"), std::string::npos) << plain->body;
  EXPECT_FALSE(service_.submitted().back().return_prompt_ids);
}

TEST_F(HttpFrontendTest, AStreamGivesThePromptsIdsOnceEachChoice) {
  auto completion = post_json("/v1/completions", R"({"prompt": "ab", "max_tokens": 3, "n": 2,
      "stream": true, "return_token_ids": true})");
  ASSERT_TRUE(completion);
  ASSERT_EQ(completion->status, 200) << completion->body;
  std::map<int, int> carried;  // choice index -> chunks carrying the prompt's ids
  std::map<int, bool> first_seen;
  for (const json& event : json_events(sse_data(completion->body))) {
    for (const json& choice : event["choices"]) {
      const int index = choice["index"];
      if (choice.contains("prompt_token_ids")) {
        EXPECT_FALSE(first_seen[index]) << "not on the choice's first chunk: " << event;
        EXPECT_EQ(choice["prompt_token_ids"], json({97, 98}));
        ++carried[index];
      }
      first_seen[index] = true;
    }
  }
  EXPECT_EQ(carried, (std::map<int, int>{{0, 1}, {1, 1}}));

  auto chat = post_json("/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "u"}], "max_tokens": 2,
                            "stream": true, "return_token_ids": true})");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const std::vector<json> events = json_events(sse_data(chat->body));
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[0]["prompt_token_ids"], json({0}));
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_FALSE(events[i].contains("prompt_token_ids")) << events[i];
  }
}

TEST_F(HttpFrontendTest, ClientThatDisconnectsMidStreamAbortsTheRequest) {
  service_.set_hold(true);
  std::string id;
  {
    RawConnection connection(port());
    id = open_stream(service_, connection, "/v1/chat/completions",
                     R"({"messages": [{"role": "user", "content": "x"}], "stream": true})");
    ASSERT_FALSE(id.empty());
    service_.push(id, 1);
    ASSERT_NE(connection.read_until("\"content\":\"a\"").find("\"content\":\"a\""),
              std::string::npos);
    connection.reset();
  }
  // No more tokens come: the keep-alive comment is what finds the client gone.
  EXPECT_TRUE(service_.wait_for_abort(id, kPatienceSeconds));
}

// A non-streamed request writes nothing before its answer, so its client's going away is found
// by looking at the connection (ClientConnectionWatch), and the request is aborted as vLLM
// aborts it, not generated to its end for nobody. The client closes its connection, as one that
// times out does.
TEST_F(HttpFrontendTest, ANonStreamedRequestWhoseClientWentAwayIsAborted) {
  service_.set_hold(true);
  std::string id;
  {
    RawConnection connection(port());
    id = open_stream(service_, connection, "/v1/completions", R"({"prompt": "x"})");
    ASSERT_FALSE(id.empty());
  }  // closed
  EXPECT_TRUE(service_.wait_for_abort(id, kPatienceSeconds));
}

// A client still connected after the watch's first look (1 s) gets its answer.
TEST_F(HttpFrontendTest, ANonStreamedRequestOfAClientStillThereIsAnswered) {
  service_.set_hold(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  ASSERT_FALSE(id.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past two looks
  service_.push(id, 2);
  service_.finish(id, Finish::kLength);
  const std::string answer = connection.read_until("\"total_tokens\"");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 200")) << answer;
  EXPECT_NE(answer.find("\"text\":\"ab\""), std::string::npos) << answer;
  EXPECT_TRUE(service_.aborted().empty());
}

TEST_F(HttpFrontendTest, DisconnectNoticedOnTheNextToken) {
  service_.set_hold(true);
  std::string id;
  {
    RawConnection connection(port());
    id = open_stream(service_, connection, "/v1/completions", R"({"prompt": "x", "stream": true})");
    ASSERT_FALSE(id.empty());
    service_.push(id, 1);
    connection.read_until("\"text\":\"a\"");
    connection.reset();
  }
  // Keep producing; a write fails soon enough and the frontend aborts.
  bool aborted = false;
  for (int i = 0; i < 3000 && !aborted; ++i) {
    service_.push(id, 1);
    aborted = service_.wait_for_abort(id, 0.01);
  }
  EXPECT_TRUE(aborted);
}

TEST_F(HttpFrontendTest, StopEndsOpenStreamsWithAnErrorAndAbortsThem) {
  service_.set_hold(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/completions", R"({"prompt": "x", "stream": true})");
  ASSERT_FALSE(id.empty());
  service_.push(id, 1);
  connection.read_until("\"text\":\"a\"");

  frontend_->stop();
  EXPECT_TRUE(service_.wait_for_abort(id, 0));  // stop() returned: the abort already happened
  const std::string all = connection.read_until("data: [DONE]");
  EXPECT_NE(all.find("shutting down"), std::string::npos) << all;
  EXPECT_NE(all.find("data: [DONE]"), std::string::npos) << all;
}

TEST_F(HttpFrontendTest, StopAbortsAWaitingNonStreamedRequest) {
  service_.set_hold(true);
  std::thread caller([&] {
    auto result = post_json("/v1/completions", R"({"prompt": "x"})");
    // Either the 503 arrives or the connection closes with the server; never a 200.
    if (result) {
      EXPECT_EQ(result->status, 503);
    }
  });
  ASSERT_TRUE(service_.wait_for_submits(1, kPatienceSeconds));
  const std::string id = service_.submitted()[0].request_id;
  frontend_->stop();
  caller.join();
  EXPECT_TRUE(service_.wait_for_abort(id, 0));
}

TEST_F(HttpFrontendTest, ManyConcurrentStreams) {
  constexpr int kStreams = 64;
  std::vector<std::thread> clients;
  std::atomic<int> complete{0};
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&] {
      auto result =
          post_json("/v1/completions", R"({"prompt": "x", "max_tokens": 3, "stream": true})");
      if (result && result->status == 200 && sse_data(result->body).back() == "[DONE]") {
        ++complete;
      } else {
        ADD_FAILURE() << (result ? result->body : httplib::to_string(result.error()));
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(complete.load(), kStreams);
}

TEST_F(HttpFrontendTest, TwoHundredFiftySixStreamsAtOnce) {
  // Every stream holds a worker thread while it is open: all of them must be served together.
  constexpr size_t kStreams = 256;
  service_.set_hold(true);
  const std::string body = R"({"prompt": "x", "stream": true})";
  std::vector<std::unique_ptr<RawConnection>> connections;
  for (size_t i = 0; i < kStreams; ++i) {
    connections.push_back(std::make_unique<RawConnection>(port()));
    connections.back()->send(post_request("/v1/completions", body));
  }
  ASSERT_TRUE(service_.wait_for_submits(kStreams, kPatienceSeconds));
  for (const GenerateInput& input : service_.submitted()) {
    service_.push(input.request_id, 2);
    service_.finish(input.request_id, Finish::kLength);
  }
  for (auto& connection : connections) {
    const std::string all = connection->read_until("data: [DONE]");
    EXPECT_NE(all.find("\"text\":\"ab\""), std::string::npos) << all;
    EXPECT_NE(all.find("\"finish_reason\":\"length\""), std::string::npos) << all;
    EXPECT_NE(all.find("data: [DONE]"), std::string::npos);
  }
  EXPECT_TRUE(service_.aborted().empty());
}

}  // namespace
}  // namespace headway::serving::testing
