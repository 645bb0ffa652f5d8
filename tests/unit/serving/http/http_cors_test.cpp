// Browser clients (CORS) through the running frontend: preflights answered without the API key,
// the allowing headers on every answer to a listed origin (streams and errors included), none for
// another origin, and nothing at all while no origin is configured.
#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

constexpr const char* kPage = "http://localhost:3000";
constexpr const char* kKey = "secret";

class HttpCorsTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.api_key = kKey;
    options.cors_allowed_origins = {"https://chat.example.com", kPage};
    start_frontend(options);
  }
  // A browser's preflight for `method` on `path` from `origin`.
  httplib::Result preflight(const std::string& path, const std::string& origin,
                            const std::string& method, const std::string& headers = "") const {
    httplib::Headers sent = {{"Origin", origin}, {"Access-Control-Request-Method", method}};
    if (!headers.empty()) sent.emplace("Access-Control-Request-Headers", headers);
    return client().Options(path, sent);
  }
  static httplib::Headers from(const std::string& origin, bool with_key = true) {
    httplib::Headers headers = {{"Origin", origin}};
    if (with_key) headers.emplace("Authorization", std::string("Bearer ") + kKey);
    return headers;
  }
};

TEST_F(HttpCorsTest, APreflightIsAnsweredWithoutTheApiKey) {
  auto result = preflight("/v1/chat/completions", kPage, "POST",
                          "authorization,content-type,x-stainless-lang");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Origin"), kPage);
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Headers"),
            "authorization,content-type,x-stainless-lang");
  EXPECT_EQ(result->get_header_value("Access-Control-Max-Age"), "600");
  EXPECT_EQ(result->get_header_value("Vary"), "Origin");
  EXPECT_TRUE(result->body.empty());
  EXPECT_TRUE(service_.submitted().empty());

  // A path with several methods: the kept responses are fetched and deleted from a page too.
  auto kept = preflight("/v1/responses/resp_0123", "https://chat.example.com", "DELETE");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->status, 200) << kept->body;
  EXPECT_EQ(kept->get_header_value("Access-Control-Allow-Methods"), "GET, DELETE");
  EXPECT_EQ(kept->get_header_value("Access-Control-Allow-Origin"), "https://chat.example.com");

  // An unknown route has no methods to allow: 404, whose origin header lets the page read why.
  auto unknown = preflight("/v1/embeddings", kPage, "POST");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(unknown->get_header_value("Access-Control-Allow-Origin"), kPage);
  EXPECT_FALSE(unknown->has_header("Access-Control-Allow-Methods"));
}

TEST_F(HttpCorsTest, AnswersToAListedOriginAllowItErrorsAndStreamsIncluded) {
  auto answered =
      post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2})", from(kPage));
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200) << answered->body;
  EXPECT_EQ(answered->get_header_value("Access-Control-Allow-Origin"), kPage);
  EXPECT_FALSE(answered->has_header("Access-Control-Allow-Credentials"));

  auto streamed = post_json("/v1/chat/completions",
                            R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                                "stream": true})",
                            from(kPage));
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(streamed->get_header_value("Access-Control-Allow-Origin"), kPage);
  EXPECT_EQ(sse_data(streamed->body).back(), "[DONE]");

  // A page's script reads why it failed: a missing key, an unknown route, a wrong method.
  auto unauthorized = post_json("/v1/completions", R"({"prompt": "hello"})", from(kPage, false));
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
  EXPECT_EQ(unauthorized->get_header_value("Access-Control-Allow-Origin"), kPage);
  EXPECT_EQ(error_of(unauthorized->body)["code"], 401);
  auto unknown = client().Get("/v1/embeddings", from(kPage));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(unknown->get_header_value("Access-Control-Allow-Origin"), kPage);
  auto wrong_method = client().Get("/v1/completions", from(kPage));
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("Access-Control-Allow-Origin"), kPage);
}

TEST_F(HttpCorsTest, AnotherOriginIsServedButNotAllowed) {
  // CORS is not access control: the key is. The browser keeps this answer from the page.
  auto answered = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2})",
                            from("https://evil.example"));
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200);
  EXPECT_FALSE(answered->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(answered->get_header_value("Vary"), "Origin");

  auto refused = preflight("/v1/completions", "https://evil.example", "POST");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_FALSE(refused->has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(refused->has_header("Access-Control-Allow-Methods"));
  EXPECT_NE(error_of(refused->body)["message"].get<std::string>().find("https://evil.example"),
            std::string::npos);

  auto wrong_method = preflight("/v1/models", kPage, "POST");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 400);
  EXPECT_FALSE(wrong_method->has_header("Access-Control-Allow-Methods"));
  EXPECT_NE(error_of(wrong_method->body)["message"].get<std::string>().find("it takes GET"),
            std::string::npos);

  // OPTIONS that is no preflight stays a wrong method.
  auto plain = client().Options("/v1/completions", from(kPage, false));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 405);
  EXPECT_EQ(plain->get_header_value("Allow"), "POST");
}

TEST_F(HttpCorsTest, CredentialsAreAllowedWhenConfigured) {
  HttpOptions options;
  options.cors_allowed_origins = {kPage};
  options.cors_allow_credentials = true;
  start_frontend(options);
  auto result = preflight("/v1/models", kPage, "GET", "authorization");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Credentials"), "true");
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Headers"), "authorization");
  auto models = client().Get("/v1/models", from(kPage, false));
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(models->get_header_value("Access-Control-Allow-Credentials"), "true");
  EXPECT_EQ(models->get_header_value("Access-Control-Allow-Origin"), kPage);

  // Another page's request would carry the browser's credentials: refused before it runs, even
  // as a form-like POST (text/plain) that needs no preflight.
  auto other = client().Post("/v1/completions", from("https://evil.example", false),
                             R"({"prompt": "hello", "max_tokens": 2})", "text/plain");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403);
  EXPECT_TRUE(service_.submitted().empty());
  auto no_page = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2})");
  ASSERT_TRUE(no_page);
  EXPECT_EQ(no_page->status, 200);

  options.cors_allowed_origins = {"*"};
  EXPECT_THROW((HttpFrontend{service_, options}), std::invalid_argument);
}

TEST_F(HttpCorsTest, EveryOriginGetsTheWildcard) {
  HttpOptions options;
  options.cors_allowed_origins = {"*"};
  start_frontend(options);
  auto result = client().Get("/v1/models", from("https://anywhere.example", false));
  ASSERT_TRUE(result);
  EXPECT_EQ(result->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_FALSE(result->has_header("Vary"));
  auto asked = preflight("/v1/chat/completions", "https://anywhere.example", "POST",
                         "authorization,content-type");
  ASSERT_TRUE(asked);
  EXPECT_EQ(asked->status, 200);
  EXPECT_EQ(asked->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(asked->get_header_value("Access-Control-Allow-Headers"), "authorization,content-type");
}

TEST_F(HttpFrontendTest, WithoutCorsOriginsNoAnswerAllowsAPage) {
  auto preflight = client().Options("/v1/completions",
                                    {{"Origin", kPage}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 405);
  EXPECT_EQ(preflight->get_header_value("Allow"), "POST");
  EXPECT_FALSE(preflight->has_header("Access-Control-Allow-Origin"));
  auto answered =
      post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2})", {{"Origin", kPage}});
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200);
  EXPECT_FALSE(answered->has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(answered->has_header("Vary"));
}

}  // namespace
}  // namespace headway::serving::testing
