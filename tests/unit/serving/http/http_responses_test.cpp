// OpenAI's Responses API through the HTTP frontend: POST /v1/responses answered whole and
// streamed (typed events), with the reasoning, text and calls of an answer as output items, and
// failures ended as the API ends them.
#include <future>
#include <string>
#include <vector>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

class HttpResponsesTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.reasoning_parser = "qwen3";
    options.tool_call_parser = "hermes";
    start_frontend(options);
  }
  // A request answered with `answer`: max_output_tokens is its length (one token per byte), which
  // ends it (the fake answers a stop in 3 tokens), so the response is "incomplete".
  std::string request(const std::string& answer, const std::string& extra = "") {
    service_.set_script(answer);
    return R"({"input": "Weather?", "max_output_tokens": )" + std::to_string(answer.size()) +
           extra + "}";
  }
  json response_of(const std::string& body) {
    auto result = post_json("/v1/responses", body);
    EXPECT_TRUE(result);
    if (!result) return json();
    EXPECT_EQ(result->status, 200) << result->body;
    return json::parse(result->body);
  }
  // Holds the service's streams and opens a streamed request asking for logprobs (and `more`
  // fields) on `connection`; its request id, or "" when it never arrived (the caller asserts).
  std::string open_held_stream(RawConnection& connection, const std::string& more = "") {
    service_.set_hold(true);
    return open_stream(
        service_, connection, "/v1/responses",
        R"({"input": "x", "stream": true, "include": ["message.output_text.logprobs"])" + more +
            "}");
  }
  // Whether a keep-alive comment arrived after byte `from` of what `connection` read: the
  // responder went a second without output, so whatever was pushed before was read on its own.
  static bool keep_alive_after(RawConnection& connection, size_t from) {
    return connection.read_until(": keep-alive", from).find(": keep-alive", from) !=
           std::string::npos;
  }
  // The events of `type` in a raw stream (each event is written whole, within one chunk).
  static std::vector<json> raw_events(const std::string& raw, const std::string& type) {
    std::vector<json> events;
    const std::string head = "event: " + type + "\ndata: ";
    for (size_t at = raw.find(head); at != std::string::npos; at = raw.find(head, at + 1)) {
      const size_t data = at + head.size();
      events.push_back(json::parse(raw.substr(data, raw.find("\n\n", data) - data)));
    }
    return events;
  }
  // The response of the response.completed event that ends the stream on `connection`.
  static json completed_response(RawConnection& connection) {
    const std::string all = connection.read_until("\r\n0\r\n\r\n");  // the last chunk
    const size_t event = all.find("event: response.completed\ndata: ");
    if (event == std::string::npos) {
      ADD_FAILURE() << "no response.completed in " << all;
      return json();
    }
    const size_t data = all.find("data: ", event) + 6;
    return json::parse(all.substr(data, all.find("\n\n", data) - data))["response"];
  }
  // The stream's events, each checked to carry its type in both places and the next number.
  std::vector<json> events_of(const std::string& body) {
    auto result = post_json("/v1/responses", body);
    EXPECT_TRUE(result);
    if (!result) return {};
    EXPECT_EQ(result->status, 200) << result->body;
    EXPECT_EQ(result->body.find("[DONE]"), std::string::npos);
    std::vector<json> events;
    size_t at = 0;
    while (at < result->body.size()) {
      size_t end = result->body.find("\n\n", at);
      if (end == std::string::npos) end = result->body.size();
      const std::string block = result->body.substr(at, end - at);
      at = end + 2;
      if (block.starts_with(":")) continue;  // a keep-alive comment
      const size_t newline = block.find('\n');
      EXPECT_TRUE(block.starts_with("event: ") && newline != std::string::npos) << block;
      if (newline == std::string::npos) continue;
      json event = json::parse(block.substr(newline + 1 + std::string_view("data: ").size()));
      EXPECT_EQ(block.substr(7, newline - 7), event["type"]) << block;
      EXPECT_EQ(event["sequence_number"], events.size()) << block;
      events.push_back(std::move(event));
    }
    return events;
  }
};

const std::string kCall =
    R"(<tool_call>{"name": "weather", "arguments": {"city": "Paris"}}</tool_call>)";
const std::string kTools = R"(, "tools": [{"type": "function", "name": "weather"}])";

// A prompt that opened the thinking (Qwen3-Thinking-2507's template): the answer's text before
// "</think>" is a reasoning item, its tokens the reasoning tokens.
TEST_F(HttpResponsesTest, APromptThatOpenedTheThinkingGivesAReasoningItem) {
  service_.set_prompt_reasoning(PromptReasoning::kOpen);
  const json response = response_of(request("Look it up.</think>\n\nSunny."));
  const json& output = response["output"];
  ASSERT_EQ(output.size(), 2u) << output;
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[0]["content"][0]["text"], "Look it up.");
  EXPECT_EQ(output[1]["content"][0]["text"], "\n\nSunny.");
  EXPECT_EQ(response["usage"]["output_tokens_details"]["reasoning_tokens"],
            std::string("Look it up.</think>").size());
}

TEST_F(HttpResponsesTest, AWholeAnswerIsAResponseOfItems) {
  const json response =
      response_of(request("<think>Look it up.</think>\n\nChecking." + kCall, kTools));
  EXPECT_TRUE(response["id"].get<std::string>().starts_with("resp_")) << response;
  EXPECT_EQ(response["object"], "response");
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["model"], FakeGenerationService::kModelName);
  EXPECT_EQ(response["store"], true);
  EXPECT_EQ(response["tools"][0]["name"], "weather");
  const json& output = response["output"];
  ASSERT_EQ(output.size(), 3u) << output;
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_TRUE(output[0]["id"].get<std::string>().starts_with("rs_"));
  EXPECT_EQ(output[0]["content"][0]["text"], "Look it up.");
  EXPECT_EQ(output[1]["type"], "message");
  EXPECT_EQ(output[1]["role"], "assistant");
  EXPECT_EQ(output[1]["status"], "completed");
  EXPECT_EQ(output[1]["content"][0]["type"], "output_text");
  EXPECT_EQ(output[1]["content"][0]["text"], "\n\nChecking.");
  EXPECT_EQ(output[2]["type"], "function_call");
  EXPECT_EQ(output[2]["name"], "weather");
  EXPECT_EQ(json::parse(output[2]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_FALSE(output[2]["call_id"].get<std::string>().empty());
  const json& usage = response["usage"];
  EXPECT_EQ(usage["input_tokens"], FakeGenerationService::kPromptTokens);
  EXPECT_EQ(usage["input_tokens_details"]["cached_tokens"],
            FakeGenerationService::kCachedPromptTokens);
  // Required by the openai SDK's types (InputTokensDetails.cache_write_tokens: int).
  EXPECT_EQ(usage["input_tokens_details"]["cache_write_tokens"], 0);
  const size_t generated = ("<think>Look it up.</think>\n\nChecking." + kCall).size();
  EXPECT_EQ(usage["output_tokens"], generated);
  EXPECT_EQ(usage["total_tokens"], generated + FakeGenerationService::kPromptTokens);
  // One token per byte: the thinking ends with the last byte of "</think>".
  EXPECT_EQ(usage["output_tokens_details"]["reasoning_tokens"],
            std::string("<think>Look it up.</think>").size());

  // What ran: a chat request of the input.
  const std::vector<GenerateInput> submitted = service_.submitted();
  ASSERT_EQ(submitted.back().messages.size(), 1u);
  EXPECT_EQ(submitted.back().messages[0].content, "Weather?");
}

TEST_F(HttpResponsesTest, AnAnswerCutShortIsIncomplete) {
  service_.set_script("abcdef");
  service_.set_finish(Finish::kLength);
  const json response = response_of(R"({"input": "x", "max_output_tokens": 3})");
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(response["output"][0]["status"], "incomplete");
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "abc");
  EXPECT_EQ(response["max_output_tokens"], 3);
}

TEST_F(HttpResponsesTest, TheStreamBuildsTheSameResponse) {
  const std::string answer = "<think>Look it up.</think>\n\nChecking." + kCall;
  const std::vector<json> events = events_of(request(answer, kTools + R"(, "stream": true)"));
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0]["type"], "response.created");
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
  EXPECT_TRUE(events[0]["response"]["output"].empty());
  EXPECT_EQ(events[1]["type"], "response.in_progress");
  const json& last = events.back();
  ASSERT_EQ(last["type"], "response.completed");
  const json& response = last["response"];
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["id"], events[0]["response"]["id"]);

  // Each item is announced, filled by deltas and closed with what the final response holds.
  std::string reasoning;
  std::string text;
  std::vector<json> done_items;
  std::vector<std::string> types;
  for (const json& event : events) {
    const std::string type = event["type"];
    types.push_back(type);
    if (type == "response.reasoning_text.delta") reasoning += event["delta"].get<std::string>();
    if (type == "response.output_text.delta") text += event["delta"].get<std::string>();
    if (type == "response.output_text.delta" || type == "response.reasoning_text.delta") {
      EXPECT_EQ(event["output_index"], done_items.size()) << event;
    }
    if (type == "response.output_item.done") {
      EXPECT_EQ(event["output_index"], done_items.size());
      done_items.push_back(event["item"]);
    }
  }
  EXPECT_EQ(reasoning, "Look it up.");
  EXPECT_EQ(text, "\n\nChecking.");
  ASSERT_EQ(done_items.size(), 3u);
  EXPECT_EQ(json(done_items), response["output"]);
  EXPECT_EQ(response["output"][2]["type"], "function_call");
  EXPECT_EQ(response["usage"]["output_tokens"], answer.size());
  EXPECT_EQ(response["usage"]["output_tokens_details"]["reasoning_tokens"],
            std::string("<think>Look it up.</think>").size());
  // The order of a message's events, as OpenAI sends them.
  const std::vector<std::string> message_events = {
      "response.output_item.added", "response.content_part.added", "response.output_text.delta"};
  auto at = std::search(types.begin(), types.end(), message_events.begin(), message_events.end());
  EXPECT_NE(at, types.end());
  const std::vector<std::string> call_events = {
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done"};
  EXPECT_NE(std::search(types.begin(), types.end(), call_events.begin(), call_events.end()),
            types.end());
  // Whole and streamed give the same items.
  const json whole = response_of(request(answer, kTools));
  ASSERT_EQ(whole["output"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    json whole_item = whole["output"][i];
    json streamed_item = response["output"][i];
    for (json* item : {&whole_item, &streamed_item}) {
      item->erase("id");  // fresh in each response, as are call ids
      item->erase("call_id");
    }
    EXPECT_EQ(whole_item, streamed_item);
  }
}

TEST_F(HttpResponsesTest, LogprobsGoWithTheirText) {
  service_.set_script("abc");
  service_.set_finish(Finish::kStop);
  const std::string body =
      R"({"input": "x", "max_output_tokens": 3, "include": ["message.output_text.logprobs"],
          "top_logprobs": 2)";
  const json whole = response_of(body + "}");
  EXPECT_EQ(whole["status"], "completed");
  EXPECT_TRUE(whole["incomplete_details"].is_null());
  const json& logprobs = whole["output"][0]["content"][0]["logprobs"];
  ASSERT_EQ(logprobs.size(), 3u) << whole;
  EXPECT_EQ(logprobs[0]["token"], "a");
  EXPECT_DOUBLE_EQ(logprobs[0]["logprob"].get<double>(), -0.5);
  EXPECT_EQ(logprobs[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(whole["top_logprobs"], 2);

  size_t streamed = 0;
  for (const json& event : events_of(body + R"(, "stream": true})")) {
    if (event["type"] == "response.output_text.delta") streamed += event["logprobs"].size();
    if (event["type"] == "response.completed") {
      EXPECT_EQ(event["response"]["output"][0]["content"][0]["logprobs"], logprobs);
    }
  }
  EXPECT_EQ(streamed, 3u);
}

// A token without text (here an id outside the tokenizer; also the first byte of a character
// split across tokens) makes a step with logprobs and nothing to send: the stream stays open
// (an empty write would end the chunked body), and its figures come with the next text.
TEST_F(HttpResponsesTest, ATokenWithoutTextKeepsTheStreamOpenAndItsLogprobs) {
  RawConnection connection(port());
  const std::string id = open_held_stream(connection);
  ASSERT_FALSE(id.empty());
  const size_t read_so_far = connection.read_until("").size();
  service_.push_textless(id, 1);
  // Written after a second without output: the step without text was taken on its own.
  ASSERT_TRUE(keep_alive_after(connection, read_so_far));
  service_.push(id, 1);
  service_.finish(id, Finish::kStop);
  const std::string all = connection.read_until("\r\n0\r\n\r\n");  // the chunked body's end
  EXPECT_LT(all.find("event: response.completed"), all.find("\r\n0\r\n\r\n")) << all;
  const json response = completed_response(connection);
  EXPECT_EQ(response["status"], "completed");
  const json& part = response["output"][0]["content"][0];
  EXPECT_EQ(part["text"], "a");
  EXPECT_EQ(part["logprobs"].size(), 2u) << part;
  EXPECT_TRUE(service_.aborted().empty());
}

// The markup of a call is not output text: its tokens' logprobs are not the message's, in the
// deltas or in the response.
TEST_F(HttpResponsesTest, LogprobsOfACallAreNotTheMessages) {
  service_.set_script("Hi" + kCall);
  RawConnection connection(port());
  const std::string id = open_held_stream(connection, kTools);
  ASSERT_FALSE(id.empty());
  service_.push(id, 2);
  ASSERT_NE(connection.read_until("\"delta\":\"Hi\"").find("\"delta\":\"Hi\""), std::string::npos);
  service_.push(id, static_cast<int>(kCall.size()));
  service_.finish(id, Finish::kStop);
  const json response = completed_response(connection);
  ASSERT_EQ(response["output"].size(), 2u) << response;
  EXPECT_EQ(response["output"][0]["content"][0]["logprobs"].size(), 2u) << response;
  EXPECT_EQ(response["output"][1]["type"], "function_call");
  size_t streamed = 0;
  for (const json& delta : raw_events(connection.read_until(""), "response.output_text.delta")) {
    streamed += delta["logprobs"].size();
  }
  EXPECT_EQ(streamed, 2u);
}

// The thinking's tokens are not listed; the tokens of its end tag, read before the text, go with
// the text, in the deltas and in the response.
TEST_F(HttpResponsesTest, LogprobsOfTheThinkingAreNotTheMessages) {
  service_.set_script("<think>ab</think>cd");
  RawConnection connection(port());
  const std::string id = open_held_stream(connection);
  ASSERT_FALSE(id.empty());
  service_.push(id, 9);  // "<think>ab"
  ASSERT_NE(connection.read_until("\"delta\":\"ab\"").find("\"delta\":\"ab\""), std::string::npos);
  const size_t read_so_far = connection.read_until("").size();
  service_.push(id, 8);  // "</think>": no text of its own
  // Written after a second without output: the tag was read on its own.
  ASSERT_TRUE(keep_alive_after(connection, read_so_far));
  service_.push(id, 2);  // "cd"
  service_.finish(id, Finish::kStop);
  const json response = completed_response(connection);
  ASSERT_EQ(response["output"].size(), 2u) << response;
  EXPECT_EQ(response["output"][0]["type"], "reasoning");
  const json& part = response["output"][1]["content"][0];
  EXPECT_EQ(part["text"], "cd");
  std::string listed;
  for (const json& entry : part["logprobs"]) listed += entry["token"].get<std::string>();
  EXPECT_EQ(listed, "</think>cd");
  std::string streamed;
  for (const json& delta : raw_events(connection.read_until(""), "response.output_text.delta")) {
    for (const json& entry : delta["logprobs"]) streamed += entry["token"].get<std::string>();
  }
  EXPECT_EQ(streamed, listed);
  EXPECT_EQ(response["usage"]["output_tokens_details"]["reasoning_tokens"], 17);
}

// A refusal that comes after the request was submitted (behind a router, the engine's) names the
// Responses field too.
TEST_F(HttpResponsesTest, ALateRefusalNamesTheResponsesField) {
  service_.set_hold(true);
  service_.set_admission_pending(true);
  auto answer = std::async(std::launch::async, [&] {
    return post_json("/v1/responses", R"({"input": "x", "text": {"format": {"type": "json_schema",
        "name": "n", "schema": {"type": "object"}}}})");
  });
  ASSERT_TRUE(service_.wait_for_submits(1, kPatienceSeconds));
  const std::string id = service_.submitted()[0].request_id;
  service_.refuse(id, ServiceError(ErrorCode::kInvalidArgument,
                                   "response_format.json_schema.schema: not for this engine",
                                   "response_format.json_schema.schema"));
  auto result = answer.get();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400) << result->body;
  json error = error_of(result->body);
  EXPECT_EQ(error["param"], "text.format.schema");
  EXPECT_EQ(error["message"], "text.format.schema: not for this engine");

  // Streamed, the 200 waits for the engine's yes: the refusal is the same answer.
  auto streamed = std::async(std::launch::async, [&] {
    return post_json("/v1/responses", R"({"input": "x", "stream": true, "text": {"format":
        {"type": "json_schema", "name": "n", "schema": {"type": "object"}}}})");
  });
  ASSERT_TRUE(service_.wait_for_submits(2, kPatienceSeconds));
  service_.refuse(service_.submitted()[1].request_id,
                  ServiceError(ErrorCode::kInvalidArgument,
                               "response_format.json_schema.schema: not for this engine",
                               "response_format.json_schema.schema"));
  result = streamed.get();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400) << result->body;
  error = error_of(result->body);
  EXPECT_EQ(error["param"], "text.format.schema");
}

// A client that leaves a non-streamed request has it aborted, not generated for nobody.
TEST_F(HttpResponsesTest, AClientThatLeavesAWholeAnswerAbortsIt) {
  service_.set_hold(true);
  std::string id;
  {
    RawConnection connection(port());
    const size_t before = service_.submitted().size();
    connection.send(post_request("/v1/responses", R"({"input": "x"})"));
    ASSERT_TRUE(service_.wait_for_submits(before + 1, kPatienceSeconds));
    id = service_.submitted()[before].request_id;
    service_.push(id, 1);
  }  // closed, as a client that times out closes it
  EXPECT_TRUE(service_.wait_for_abort(id, kPatienceSeconds));
}

TEST_F(HttpResponsesTest, AnEmptyAnswerIsAnEmptyMessage) {
  service_.set_hold(true);
  RawConnection connection(port());
  const std::string id =
      open_stream(service_, connection, "/v1/responses", R"({"input": "x", "stream": true})");
  ASSERT_FALSE(id.empty());
  service_.push_textless(id, 1);
  service_.finish(id, Finish::kStop);
  const json response = completed_response(connection);
  EXPECT_EQ(response["usage"]["output_tokens"], 1);
  ASSERT_EQ(response["output"].size(), 1u) << response;
  EXPECT_EQ(response["output"][0]["type"], "message");
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "");
}

TEST_F(HttpResponsesTest, AFailureEndsTheStreamAsFailed) {
  service_.set_finish(Finish::kError, "engine 1 lost");
  const std::vector<json> events =
      events_of(R"({"input": "x", "max_output_tokens": 3, "stream": true})");
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2]["type"], "error");
  EXPECT_NE(events[events.size() - 2]["message"].get<std::string>().find("engine 1 lost"),
            std::string::npos);
  EXPECT_TRUE(events[events.size() - 2]["param"].is_null());
  EXPECT_EQ(events.back()["type"], "response.failed");
  EXPECT_EQ(events.back()["response"]["status"], "failed");
  EXPECT_EQ(events.back()["response"]["error"]["code"], "server_error");
  // The message the failure cut short ended first, as far as it went.
  ASSERT_GE(events.size(), 3u);
  const json& item_done = events[events.size() - 3];
  EXPECT_EQ(item_done["type"], "response.output_item.done");
  EXPECT_EQ(item_done["item"]["status"], "incomplete");
  EXPECT_EQ(item_done["item"]["content"][0]["text"], "abc");
  EXPECT_EQ(events.back()["response"]["output"], json::array({item_done["item"]}));

  // Not streamed: the failure's own status.
  auto result = post_json("/v1/responses", R"({"input": "x", "max_output_tokens": 3})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 500);
  EXPECT_NE(error_of(result->body)["message"].get<std::string>().find("engine 1 lost"),
            std::string::npos);
}

TEST_F(HttpResponsesTest, RefusalsNameTheResponsesField) {
  auto result = post_json("/v1/responses", R"({"input": "x", "max_output_tokens": 0})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  EXPECT_EQ(error_of(result->body)["param"], "max_output_tokens");
  EXPECT_GE(service_.refused_by_frontend(), 1u);

  // The service's refusal, renamed too.
  service_.fail_submits_with(
      ServiceError(ErrorCode::kInvalidArgument, "messages: too long", "messages[0].content"));
  result = post_json("/v1/responses", R"({"input": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  EXPECT_EQ(error_of(result->body)["param"], "input[0].content");
  result = post_json("/v1/responses", R"({"input": "x"})");  // the text is the message's content
  ASSERT_TRUE(result);
  EXPECT_EQ(error_of(result->body)["param"], "input");
  service_.fail_submits_with(std::nullopt);
}

}  // namespace
}  // namespace headway::serving::testing
