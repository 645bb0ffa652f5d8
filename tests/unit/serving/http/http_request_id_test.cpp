// Request ids clients choose: the X-Request-Id header (echoed back on every answer) or the body's
// request_id, in the answer's id and, with a random part after it, the id the service runs the
// request under.
#include <string>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

constexpr const char* kTrace = "0f6c2d1e-trace-7";

TEST_F(HttpFrontendTest, XRequestIdNamesTheAnswerAndComesBack) {
  auto completion = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2})",
                              {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(completion);
  ASSERT_EQ(completion->status, 200) << completion->body;
  EXPECT_EQ(json::parse(completion->body)["id"], std::string("cmpl-") + kTrace);
  EXPECT_EQ(completion->get_header_value("X-Request-Id"), kTrace);

  auto chat = post_json("/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                            "stream": true})",
                        {{"X-Request-Id", "chat-1"}});
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200);
  EXPECT_EQ(chat->get_header_value("X-Request-Id"), "chat-1");
  const std::vector<json> events = json_events(sse_data(chat->body));
  ASSERT_FALSE(events.empty());
  for (const json& event : events) EXPECT_EQ(event["id"], "chatcmpl-chat-1");

  // The service runs each under the answer's id, '#' and a random part: a retry under the same id
  // while the first attempt runs is taken, and no other client can name it to abort it.
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_TRUE(submitted[0].request_id.starts_with(std::string("cmpl-") + kTrace + "#"))
      << submitted[0].request_id;
  EXPECT_EQ(submitted[0].request_id.size(), std::string("cmpl-").size() + 16 + 1 + 32);
  EXPECT_TRUE(submitted[1].request_id.starts_with("chatcmpl-chat-1#")) << submitted[1].request_id;
  auto again = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2})",
                         {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(again);
  EXPECT_EQ(json::parse(again->body)["id"], std::string("cmpl-") + kTrace);
  EXPECT_NE(service_.submitted().back().request_id, submitted[0].request_id);

  // Without the header, the id is Headway's own, and the header names the answer by it (OpenAI
  // always sends one; the OpenAI SDKs show it as `_request_id`), streamed or not.
  auto plain = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2})");
  ASSERT_TRUE(plain);
  const std::string plain_id = json::parse(plain->body)["id"];
  EXPECT_NE(plain_id, std::string("cmpl-") + kTrace);
  EXPECT_EQ(plain->get_header_value("X-Request-Id"), plain_id);
  auto streamed = post_json("/v1/chat/completions",
                            R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                                "stream": true})");
  ASSERT_TRUE(streamed);
  const std::string header = streamed->get_header_value("X-Request-Id");
  EXPECT_TRUE(header.starts_with("chatcmpl-")) << header;
  EXPECT_NE(streamed->body.find("\"id\":\"" + header + "\""), std::string::npos) << streamed->body;
}

TEST_F(HttpFrontendTest, EachChoiceOfNRunsUnderTheClientsIdAndItsIndex) {
  auto result = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2, "n": 2})",
                          {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(json::parse(result->body)["id"], std::string("cmpl-") + kTrace);
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  const std::string base = submitted[0].request_id.substr(0, submitted[0].request_id.size() - 2);
  EXPECT_TRUE(base.starts_with(std::string("cmpl-") + kTrace + "#")) << base;
  EXPECT_EQ(submitted[0].request_id, base + "-0");
  EXPECT_EQ(submitted[1].request_id, base + "-1");
}

// The longest id taken, on the longest prefix, with the most choices: every id the service gets
// stays within its 256 characters.
TEST_F(HttpFrontendTest, TheLongestClientIdFitsTheServicesLimitWithEveryChoice) {
  const std::string longest(200, 'z');
  auto result = post_json("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "u"}], "max_tokens": 1,
                              "n": 128})",
                          {{"X-Request-Id", longest}});
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body.substr(0, 300);
  EXPECT_EQ(json::parse(result->body)["id"], "chatcmpl-" + longest);
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 128u);
  for (const GenerateInput& input : submitted) EXPECT_LE(input.request_id.size(), 256u);
}

// Every answer of a generation route carries the header back, refusals included.
TEST_F(HttpFrontendTest, TheRequestIdComesBackOnErrorsToo) {
  auto malformed = post_json("/v1/completions", R"({"prompt": )", {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400);
  EXPECT_EQ(malformed->get_header_value("X-Request-Id"), kTrace);
  start_frontend("secret");
  auto unauthorized = post_json("/v1/responses", R"({"input": "hi"})", {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
  EXPECT_EQ(unauthorized->get_header_value("X-Request-Id"), kTrace);
  // Refused by the routing itself: a route's wrong method.
  auto wrong_method = client().Get("/v1/chat/completions", {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("X-Request-Id"), kTrace);
  // Refused once the headers were read: a body too large.
  auto too_large = post_json("/v1/completions", std::string(kHttpMaxBodyBytes + 1, ' '),
                             {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(too_large);
  EXPECT_EQ(too_large->status, 413);
  EXPECT_EQ(too_large->get_header_value("X-Request-Id"), kTrace);
  // Not a generation route: no id to carry.
  auto models = client().Get("/v1/models", {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(models);
  EXPECT_FALSE(models->has_header("X-Request-Id"));
}

// vLLM's request_id field, which the header wins over.
TEST_F(HttpFrontendTest, TheBodysRequestIdIsTakenUnlessTheHeaderSaysOtherwise) {
  auto chat = post_json("/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                            "request_id": "from-body"})");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(json::parse(chat->body)["id"], "chatcmpl-from-body");
  EXPECT_EQ(chat->get_header_value("X-Request-Id"), "chatcmpl-from-body");

  auto both = post_json("/v1/completions",
                        R"({"prompt": "hello", "max_tokens": 2, "request_id": "from-body"})",
                        {{"X-Request-Id", "from-header"}});
  ASSERT_TRUE(both);
  EXPECT_EQ(json::parse(both->body)["id"], "cmpl-from-header");
}

TEST_F(HttpFrontendTest, AResponsesApiIdComesFromTheHeaderOrIsTheBodysAsItIs) {
  auto with_header = post_json("/v1/responses", R"({"input": "hi", "max_output_tokens": 2})",
                               {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(with_header);
  ASSERT_EQ(with_header->status, 200) << with_header->body;
  EXPECT_EQ(json::parse(with_header->body)["id"], std::string("resp_") + kTrace);
  EXPECT_EQ(with_header->get_header_value("X-Request-Id"), kTrace);

  auto with_body = post_json(
      "/v1/responses", R"({"input": "hi", "max_output_tokens": 2, "request_id": "resp_mine"})");
  ASSERT_TRUE(with_body);
  ASSERT_EQ(with_body->status, 200) << with_body->body;
  EXPECT_EQ(json::parse(with_body->body)["id"], "resp_mine");
  EXPECT_EQ(with_body->get_header_value("X-Request-Id"), "resp_mine");
  auto kept = client().Get("/v1/responses/resp_mine");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->status, 200) << kept->body;

  // A kept response is not replaced by another request choosing its id.
  auto reused = post_json(
      "/v1/responses", R"({"input": "other", "max_output_tokens": 2, "request_id": "resp_mine"})");
  ASSERT_TRUE(reused);
  EXPECT_EQ(reused->status, 400);
  EXPECT_EQ(error_of(reused->body)["param"], "request_id");
  auto reused_header = post_json("/v1/responses", R"({"input": "other", "max_output_tokens": 2})",
                                 {{"X-Request-Id", kTrace}});
  ASSERT_TRUE(reused_header);
  EXPECT_EQ(reused_header->status, 400);
  EXPECT_EQ(error_of(reused_header->body)["param"], "X-Request-Id");
  auto still = client().Get("/v1/responses/resp_mine");
  ASSERT_TRUE(still);
  EXPECT_EQ(json::parse(still->body)["output"], json::parse(kept->body)["output"]);

  // The header wins over the body here too.
  auto both = post_json("/v1/responses",
                        R"({"input": "hi", "max_output_tokens": 2, "request_id": "resp_body"})",
                        {{"X-Request-Id", "header"}});
  ASSERT_TRUE(both);
  EXPECT_EQ(json::parse(both->body)["id"], "resp_header");
}

TEST_F(HttpFrontendTest, AClientIdThatCannotBeOneIsRefusedNamingWhereItCameFrom) {
  auto too_long = post_json("/v1/completions", R"({"prompt": "hello"})",
                            {{"X-Request-Id", std::string(201, 'a')}});
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400);
  EXPECT_EQ(error_of(too_long->body)["param"], "X-Request-Id");
  EXPECT_NE(error_of(too_long->body)["message"].get<std::string>().find("201 characters"),
            std::string::npos);

  auto control = post_json("/v1/completions", R"({"prompt": "hello"})", {{"X-Request-Id", "a\tb"}});
  ASSERT_TRUE(control);
  EXPECT_EQ(control->status, 400);
  EXPECT_EQ(error_of(control->body)["param"], "X-Request-Id");

  auto body = post_json("/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "hi"}], "request_id": ""})");
  ASSERT_TRUE(body);
  EXPECT_EQ(body->status, 400);
  EXPECT_EQ(error_of(body->body)["param"], "request_id");

  auto wrong_type = post_json("/v1/completions", R"({"prompt": "hello", "request_id": 7})");
  ASSERT_TRUE(wrong_type);
  EXPECT_EQ(wrong_type->status, 400);
  EXPECT_EQ(error_of(wrong_type->body)["param"], "request_id");
  EXPECT_TRUE(service_.submitted().empty());
}

}  // namespace
}  // namespace headway::serving::testing
