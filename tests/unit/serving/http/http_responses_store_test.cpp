// The responses the frontend keeps (store true, OpenAI's default): fetched and deleted by id,
// their input items listed page by page, continued with previous_response_id; and what is not
// kept (store false, a failed response, a server that keeps none).
#include <string>
#include <vector>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

const std::string kCall =
    R"(<tool_call>{"name": "weather", "arguments": {"city": "Paris"}}</tool_call>)";
const std::string kTools = R"("tools": [{"type": "function", "name": "weather"}])";

class HttpResponsesStoreTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.tool_call_parser = "hermes";
    start_frontend(options);
  }
  // POST /v1/responses answered with `answer` (which the fake stops after, one token a byte).
  json create(const std::string& answer, const std::string& body) {
    service_.set_script(answer);
    auto result = post_json("/v1/responses", body);
    EXPECT_TRUE(result);
    if (!result) return json();
    EXPECT_EQ(result->status, 200) << result->body;
    return json::parse(result->body);
  }
  // GET `path`: its status and body (parsed).
  std::pair<int, json> get(const std::string& path) {
    auto result = client().Get(path);
    EXPECT_TRUE(result) << path;
    if (!result) return {0, json()};
    return {result->status, json::parse(result->body)};
  }
  std::pair<int, json> remove(const std::string& path) {
    auto result = client().Delete(path);
    EXPECT_TRUE(result) << path;
    if (!result) return {0, json()};
    return {result->status, json::parse(result->body)};
  }
  // The ids of a list's items.
  static std::vector<std::string> ids_of(const json& list) {
    std::vector<std::string> ids;
    for (const json& item : list["data"]) ids.push_back(item["id"]);
    return ids;
  }
};

TEST_F(HttpResponsesStoreTest, AKeptResponseIsFetchedUntilDeleted) {
  const json created = create("Sunny.", R"({"input": "Weather?", "max_output_tokens": 6})");
  EXPECT_EQ(created["store"], true);
  const std::string id = created["id"];
  const auto [status, fetched] = get("/v1/responses/" + id);
  EXPECT_EQ(status, 200) << fetched;
  EXPECT_EQ(fetched, created);

  const auto [deleted_status, deleted] = remove("/v1/responses/" + id);
  EXPECT_EQ(deleted_status, 200) << deleted;
  EXPECT_EQ(deleted, json({{"id", id}, {"object", "response"}, {"deleted", true}}));
  const auto [gone_status, gone] = get("/v1/responses/" + id);
  EXPECT_EQ(gone_status, 404);
  EXPECT_EQ(gone["error"]["param"], "response_id");
  EXPECT_NE(gone["error"]["message"].get<std::string>().find(id), std::string::npos) << gone;
  EXPECT_EQ(remove("/v1/responses/" + id).first, 404);
  EXPECT_EQ(get("/v1/responses/resp_never/input_items").first, 404);
}

TEST_F(HttpResponsesStoreTest, AConversationGoesOnFromTheResponseBefore) {
  const json first = create(kCall, R"({"input": "Weather in Paris?", "max_output_tokens": )" +
                                       std::to_string(kCall.size()) + ", " + kTools + "}");
  ASSERT_EQ(first["output"].size(), 1u) << first;
  const json& call = first["output"][0];
  ASSERT_EQ(call["type"], "function_call");
  const std::string first_id = first["id"];

  const json second = create("Sunny.", R"({"previous_response_id": ")" + first_id +
                                           R"(", "max_output_tokens": 6, "input": [
      {"type": "function_call_output", "call_id": ")" +
                                           call["call_id"].get<std::string>() +
                                           R"(", "output": "sunny"}], )" + kTools + "}");
  EXPECT_EQ(second["previous_response_id"], first_id);
  EXPECT_EQ(second["output"][0]["content"][0]["text"], "Sunny.");

  // What ran: the question, the model's call and its result.
  const std::vector<GenerateInput> submitted = service_.submitted();
  const std::vector<ChatMessage>& messages = submitted.back().messages;
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0].role, "user");
  EXPECT_EQ(messages[0].content, "Weather in Paris?");
  EXPECT_EQ(messages[1].role, "assistant");
  const json turn = json::parse(messages[1].fields_json);
  EXPECT_EQ(turn["tool_calls"][0]["id"], call["call_id"]);
  EXPECT_EQ(turn["tool_calls"][0]["function"]["name"], "weather");
  EXPECT_EQ(messages[2].role, "tool");
  EXPECT_EQ(messages[2].content, "sunny");

  // The second response is kept with the whole conversation it answered.
  const auto [status, items] =
      get("/v1/responses/" + second["id"].get<std::string>() + "/input_items?order=asc");
  ASSERT_EQ(status, 200) << items;
  ASSERT_EQ(items["data"].size(), 3u) << items;
  EXPECT_EQ(items["data"][0]["role"], "user");
  EXPECT_EQ(items["data"][1], call);
  EXPECT_EQ(items["data"][2]["type"], "function_call_output");

  // And goes on after the first is gone: it holds the conversation itself.
  EXPECT_EQ(remove("/v1/responses/" + first_id).first, 200);
  create("Good.", R"({"previous_response_id": ")" + second["id"].get<std::string>() +
                      R"(", "input": "Thanks!", "max_output_tokens": 5})");
  EXPECT_EQ(service_.submitted().back().messages.size(), 5u);

  auto refused = post_json("/v1/responses",
                           R"({"previous_response_id": ")" + first_id + R"(", "input": "x"})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(error_of(refused->body)["param"], "previous_response_id");
  EXPECT_EQ(error_of(refused->body)["code"], "previous_response_not_found");
}

TEST_F(HttpResponsesStoreTest, AStreamedResponseIsKeptAsItsStreamEndedIt) {
  service_.set_script("Sunny.");
  auto result = post_json("/v1/responses",
                          R"({"input": "Weather?", "max_output_tokens": 6, "stream": true})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200);
  const std::string head = "event: response.completed\ndata: ";
  const size_t at = result->body.find(head);
  ASSERT_NE(at, std::string::npos) << result->body;
  const size_t data = at + head.size();
  const json completed =
      json::parse(result->body.substr(data, result->body.find("\n\n", data) - data))["response"];
  EXPECT_EQ(completed["store"], true);
  const auto [status, fetched] = get("/v1/responses/" + completed["id"].get<std::string>());
  EXPECT_EQ(status, 200);
  EXPECT_EQ(fetched, completed);
}

TEST_F(HttpResponsesStoreTest, InputItemsComePageByPage) {
  const json created = create("ok", R"({"max_output_tokens": 2, "input": [
      {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
      {"type": "message", "id": "msg_mine", "role": "user", "content": "c"}]})");
  const std::string path = "/v1/responses/" + created["id"].get<std::string>() + "/input_items";
  const auto [status, newest_first] = get(path);
  ASSERT_EQ(status, 200) << newest_first;
  EXPECT_EQ(newest_first["object"], "list");
  EXPECT_EQ(newest_first["has_more"], false);
  const std::vector<std::string> ids = ids_of(newest_first);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], "msg_mine");
  EXPECT_EQ(newest_first["first_id"], ids[0]);
  EXPECT_EQ(newest_first["last_id"], ids[2]);
  EXPECT_EQ(newest_first["data"][2]["content"][0], json({{"type", "input_text"}, {"text", "a"}}));

  const auto [page_status, page] = get(path + "?limit=2");
  EXPECT_EQ(ids_of(page), std::vector<std::string>(ids.begin(), ids.begin() + 2));
  EXPECT_EQ(page["has_more"], true);
  const auto [rest_status, rest] = get(path + "?limit=2&after=" + ids[1]);
  EXPECT_EQ(ids_of(rest), std::vector<std::string>{ids[2]});
  EXPECT_EQ(rest["has_more"], false);
  const auto [oldest_status, oldest_first] = get(path + "?order=asc&after=" + ids[2]);
  EXPECT_EQ(ids_of(oldest_first), std::vector<std::string>(ids.rbegin() + 1, ids.rend()));
  const auto [empty_status, empty] = get(path + "?after=" + ids[2]);
  EXPECT_EQ(empty["data"], json::array());
  EXPECT_TRUE(empty["first_id"].is_null());

  for (const auto& [query, param] :
       std::vector<std::pair<std::string, std::string>>{{"?limit=0", "limit"},
                                                        {"?limit=101", "limit"},
                                                        {"?limit=2x", "limit"},
                                                        {"?order=newest", "order"},
                                                        {"?after=msg_nope", "after"},
                                                        {"?before=msg_mine", "before"}}) {
    const auto [refused_status, refused] = get(path + query);
    EXPECT_EQ(refused_status, 400) << query;
    EXPECT_EQ(refused["error"]["param"], param) << query << refused;
  }
}

// From helper-200's review: an item's "type": null reads as absent (a message) when checked, but
// keeping it read the null as a string: 500, "type must be string, but is null".
TEST_F(HttpResponsesStoreTest, AnItemWhoseTypeIsNullIsKeptAsAMessage) {
  const json created = create(
      "ok",
      R"({"max_output_tokens": 2, "input": [{"type": null, "role": "user", "content": "a"}]})");
  const auto [status, items] =
      get("/v1/responses/" + created["id"].get<std::string>() + "/input_items");
  ASSERT_EQ(status, 200) << items;
  ASSERT_EQ(items["data"].size(), 1u) << items;
  EXPECT_EQ(items["data"][0]["type"], "message");
  EXPECT_EQ(items["data"][0]["content"][0], json({{"type", "input_text"}, {"text", "a"}}));
}

TEST_F(HttpResponsesStoreTest, WhatIsNotKept) {
  const json unkept = create("ok", R"({"input": "x", "store": false, "max_output_tokens": 2})");
  EXPECT_EQ(unkept["store"], false);
  EXPECT_EQ(get("/v1/responses/" + unkept["id"].get<std::string>()).first, 404);

  // A failed response: its stream names an id that was never kept.
  service_.set_finish(Finish::kError, "engine 1 lost");
  auto failed =
      post_json("/v1/responses", R"({"input": "x", "max_output_tokens": 3, "stream": true})");
  ASSERT_TRUE(failed);
  const size_t at = failed->body.find("\"id\":\"resp_");
  ASSERT_NE(at, std::string::npos) << failed->body;
  const std::string id = failed->body.substr(at + 6, failed->body.find('"', at + 6) - at - 6);
  EXPECT_EQ(get("/v1/responses/" + id).first, 404) << id;
  const size_t failed_event = failed->body.find("event: response.failed\ndata: ");
  ASSERT_NE(failed_event, std::string::npos) << failed->body;
  EXPECT_EQ(
      json::parse(failed->body.substr(failed->body.find('{', failed_event)))["response"]["store"],
      false);
  service_.set_finish(Finish::kLength);

  // One larger than the whole store: answered, and said not kept.
  HttpOptions options;
  options.responses_store_bytes = 1000;
  start_frontend(options);
  const json large = create(std::string(1000, 'a'), R"({"input": "x", "max_output_tokens": 1000})");
  EXPECT_EQ(large["output"][0]["content"][0]["text"], std::string(1000, 'a'));
  EXPECT_EQ(large["store"], false);
  EXPECT_EQ(get("/v1/responses/" + large["id"].get<std::string>()).first, 404);
}

TEST_F(HttpResponsesStoreTest, AListHasTwentyItemsAPageUnlessAsked) {
  json input = json::array();
  for (int i = 0; i < 25; ++i) input.push_back({{"role", "user"}, {"content", std::to_string(i)}});
  const json created = create("ok", json({{"input", input}, {"max_output_tokens", 2}}).dump());
  const auto [status, page] =
      get("/v1/responses/" + created["id"].get<std::string>() + "/input_items");
  ASSERT_EQ(status, 200) << page;
  ASSERT_EQ(page["data"].size(), 20u);
  EXPECT_EQ(page["data"][0]["content"][0]["text"], "24");  // newest first
  EXPECT_EQ(page["has_more"], true);
  const auto [rest_status, rest] = get("/v1/responses/" + created["id"].get<std::string>() +
                                       "/input_items?after=" + page["last_id"].get<std::string>());
  ASSERT_EQ(rest["data"].size(), 5u) << rest;
  EXPECT_EQ(rest["data"][4]["content"][0]["text"], "0");
  EXPECT_EQ(rest["has_more"], false);
}

TEST_F(HttpResponsesStoreTest, AServerThatKeepsNoneSaysSo) {
  HttpOptions options;
  options.responses_store_bytes = 0;
  start_frontend(options);
  const json created = create("ok", R"({"input": "x", "max_output_tokens": 2})");
  EXPECT_EQ(created["store"], false);
  const auto [status, body] = get("/v1/responses/" + created["id"].get<std::string>());
  EXPECT_EQ(status, 404);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("responses_store_mb = 0"),
            std::string::npos)
      << body;
  auto refused =
      post_json("/v1/responses", R"({"previous_response_id": ")" +
                                     created["id"].get<std::string>() + R"(", "input": "x"})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(error_of(refused->body)["param"], "previous_response_id");
}

TEST_F(HttpResponsesStoreTest, OnlyBackgroundResponsesCouldBeCancelled) {
  const json created = create("ok", R"({"input": "x", "max_output_tokens": 2})");
  const std::string id = created["id"];
  auto cancel = post_json("/v1/responses/" + id + "/cancel", "{}");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 400);
  EXPECT_EQ(error_of(cancel->body)["param"], "response_id");
  auto unknown = post_json("/v1/responses/resp_never/cancel", "{}");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  // Not replayed as a stream either.
  const auto [status, body] = get("/v1/responses/" + id + "?stream=true");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["param"], "stream");
}

TEST_F(HttpResponsesStoreTest, EachPathNamesItsMethods) {
  auto post = post_json("/v1/responses/resp_x", "{}");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, DELETE");
  // Also without a body, which cpp-httplib refuses before it looks for the route.
  const std::string bodiless = raw_exchange(
      port(), "POST /v1/responses/resp_x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(bodiless.starts_with("HTTP/1.1 405")) << bodiless;
  EXPECT_NE(bodiless.find("Allow: GET, DELETE"), std::string::npos) << bodiless;
  const auto [status, body] = get("/v1/responses/resp_x/cancel");
  EXPECT_EQ(status, 405);
  const auto [unknown_status, unknown] = get("/v1/responses/resp_x/other");
  EXPECT_EQ(unknown_status, 404);
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("/v1/responses/{id}"),
            std::string::npos)
      << unknown;
}

TEST_F(HttpResponsesStoreTest, TheMetricsCountWhatIsKept) {
  const auto metric = [this](const std::string& name) {
    auto result = client().Get("/metrics");
    EXPECT_TRUE(result);
    if (!result) return -1.0;
    const size_t at = result->body.find("\n" + name + " ");
    if (at == std::string::npos) return -1.0;
    return std::stod(result->body.substr(at + name.size() + 2));
  };
  create("ok", R"({"input": "x", "max_output_tokens": 2})");
  EXPECT_EQ(metric("headway_responses_kept"), 1.0);
  const double one = metric("headway_responses_kept_bytes");
  EXPECT_GT(one, 100.0);
  EXPECT_EQ(metric("headway_responses_pushed_out_total"), 0.0);

  // Room for one and a half: each new one pushes the one before out.
  HttpOptions options;
  options.responses_store_bytes = static_cast<size_t>(one * 1.5);
  start_frontend(options);
  const json first = create("ok", R"({"input": "x", "max_output_tokens": 2})");
  const json second = create("ok", R"({"input": "x", "max_output_tokens": 2})");
  EXPECT_EQ(get("/v1/responses/" + first["id"].get<std::string>()).first, 404);
  EXPECT_EQ(get("/v1/responses/" + second["id"].get<std::string>()).first, 200);
  EXPECT_EQ(metric("headway_responses_kept"), 1.0);
  EXPECT_EQ(metric("headway_responses_pushed_out_total"), 1.0);
  EXPECT_EQ(metric("headway_responses_pushed_out_total"), 1.0);  // a second scrape adds nothing
}

TEST_F(HttpResponsesStoreTest, TheKeptResponsesWantTheKey) {
  HttpOptions options;
  options.api_key = "sesame";
  start_frontend(options);
  EXPECT_EQ(get("/v1/responses/resp_x").first, 401);
  EXPECT_EQ(remove("/v1/responses/resp_x").first, 401);
  EXPECT_EQ(get("/v1/responses/resp_x/input_items").first, 401);
}

}  // namespace
}  // namespace headway::serving::testing
