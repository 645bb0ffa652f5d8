// Which answers carry CORS headers, what a preflight is answered, and which settings are refused:
// the policy alone, on cpp-httplib's request and response objects (http_cors_test.cpp runs it in
// the frontend).
#include "cors_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "api_error.h"

namespace headway::serving::http {
namespace {

using ::testing::HasSubstr;

httplib::Request request_from(const std::string& origin, const std::string& method = "POST") {
  httplib::Request request;
  request.method = method;
  request.path = "/v1/chat/completions";
  if (!origin.empty()) request.headers.emplace("Origin", origin);
  return request;
}

httplib::Request preflight(const std::string& origin, const std::string& method,
                           const std::string& headers = "") {
  httplib::Request request = request_from(origin, "OPTIONS");
  request.headers.emplace("Access-Control-Request-Method", method);
  if (!headers.empty()) request.headers.emplace("Access-Control-Request-Headers", headers);
  return request;
}

const std::vector<std::string> kListed = {"https://chat.example.com", "http://localhost:3000"};

TEST(CorsPolicy, AListedOriginIsEchoedAndOthersGetNothing) {
  const CorsPolicy policy(kListed, false);
  httplib::Response allowed;
  policy.add_response_headers(request_from("http://localhost:3000"), allowed);
  EXPECT_EQ(allowed.get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(allowed.get_header_value("Vary"), "Origin");
  EXPECT_EQ(allowed.get_header_value("Access-Control-Expose-Headers"), "X-Request-Id");
  EXPECT_FALSE(allowed.has_header("Access-Control-Allow-Credentials"));

  httplib::Response other;
  policy.add_response_headers(request_from("https://evil.example"), other);
  EXPECT_FALSE(other.has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(other.has_header("Access-Control-Expose-Headers"));
  EXPECT_EQ(other.get_header_value("Vary"), "Origin");  // a cache must not reuse it for listed ones

  // Origins compare exactly, as browsers write them: another port or scheme is another origin.
  for (const char* near : {"http://localhost:3001", "https://localhost:3000",
                           "https://chat.example.com.evil.example", "https://chat.example.co"}) {
    httplib::Response response;
    policy.add_response_headers(request_from(near), response);
    EXPECT_FALSE(response.has_header("Access-Control-Allow-Origin")) << near;
  }

  // Without Origin too: a cache must not hand this answer to a page.
  httplib::Response no_origin;
  policy.add_response_headers(request_from(""), no_origin);
  EXPECT_EQ(no_origin.get_header_value("Vary"), "Origin");
  EXPECT_FALSE(no_origin.has_header("Access-Control-Allow-Origin"));
}

TEST(CorsPolicy, EveryOriginGetsTheWildcardWithoutVary) {
  const CorsPolicy policy({"*"}, false);
  httplib::Response response;
  policy.add_response_headers(request_from("https://anywhere.example"), response);
  EXPECT_EQ(response.get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(response.get_header_value("Access-Control-Expose-Headers"), "X-Request-Id");
  EXPECT_FALSE(response.has_header("Vary"));
  httplib::Response no_origin;  // the same static answer for every request
  policy.add_response_headers(request_from(""), no_origin);
  EXPECT_EQ(no_origin.get_header_value("Access-Control-Allow-Origin"), "*");
}

TEST(CorsPolicy, CredentialsAreAllowedToListedOriginsOnly) {
  const CorsPolicy policy(kListed, true);
  httplib::Response response;
  policy.add_response_headers(request_from("https://chat.example.com"), response);
  EXPECT_EQ(response.get_header_value("Access-Control-Allow-Origin"), "https://chat.example.com");
  EXPECT_EQ(response.get_header_value("Access-Control-Allow-Credentials"), "true");
  httplib::Response other;
  policy.add_response_headers(request_from("https://evil.example"), other);
  EXPECT_FALSE(other.has_header("Access-Control-Allow-Credentials"));

  EXPECT_THROW(CorsPolicy({"*"}, true), std::invalid_argument);
  EXPECT_THROW(CorsPolicy({}, true), std::invalid_argument);
}

// With credentials, another page's request would carry the browser's cookies: refused before it
// runs (a form-like POST needs no preflight, and hiding its answer would not undo it).
TEST(CorsPolicy, WithCredentialsRequestsFromOtherOriginsAreRefused) {
  const CorsPolicy policy(kListed, true);
  EXPECT_NO_THROW(policy.check_origin(request_from("https://chat.example.com")));
  EXPECT_NO_THROW(policy.check_origin(request_from("")));  // not a page's request
  try {
    policy.check_origin(request_from("https://evil.example"));
    FAIL() << "another origin with credentials";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 403);
    EXPECT_THAT(error.what(),
                AllOf(HasSubstr("\"https://evil.example\""), HasSubstr("cors_allow_credentials")));
  }
  // Without credentials a page has nothing to authenticate with: served, its answer kept from it.
  EXPECT_NO_THROW(CorsPolicy(kListed, false).check_origin(request_from("https://evil.example")));
  EXPECT_NO_THROW(CorsPolicy({}, false).check_origin(request_from("https://evil.example")));
}

TEST(CorsPolicy, NoOriginsMeansNoHeadersAndNoPreflights) {
  const CorsPolicy policy({}, false);
  EXPECT_FALSE(policy.enabled());
  httplib::Response response;
  policy.add_response_headers(request_from("https://chat.example.com"), response);
  policy.add_response_headers(request_from(""), response);
  EXPECT_TRUE(response.headers.empty());
  EXPECT_FALSE(policy.is_preflight(preflight("https://chat.example.com", "POST")));
}

TEST(CorsPolicy, AnOriginThatIsNotOneIsRefusedNamingIt) {
  try {
    CorsPolicy({"https://chat.example.com", "https://chat.example.com/"}, false);
    FAIL() << "a trailing slash never matches and must be refused";
  } catch (const std::invalid_argument& error) {
    EXPECT_THAT(error.what(),
                AllOf(HasSubstr("cors_allowed_origins"), HasSubstr("\"https://chat.example.com/\""),
                      HasSubstr("trailing slash")));
  }
}

TEST(CorsPolicy, APreflightIsAnOptionsRequestWithOriginAndMethod) {
  const CorsPolicy policy(kListed, false);
  EXPECT_TRUE(policy.is_preflight(preflight("https://chat.example.com", "POST")));
  EXPECT_TRUE(policy.is_preflight(preflight("https://evil.example", "POST")));  // refused later
  EXPECT_FALSE(policy.is_preflight(request_from("https://chat.example.com", "OPTIONS")));
  httplib::Request no_origin = preflight("", "POST");
  EXPECT_FALSE(policy.is_preflight(no_origin));
  httplib::Request post = preflight("https://chat.example.com", "POST");
  post.method = "POST";
  EXPECT_FALSE(policy.is_preflight(post));
}

TEST(CorsPolicy, APreflightIsAnsweredWithTheRoutesMethodsAndTheHeadersAsked) {
  const CorsPolicy policy(kListed, false);
  httplib::Response response;
  policy.answer_preflight(
      preflight("https://chat.example.com", "POST", "authorization,content-type,x-stainless-os"),
      response, "POST");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.get_header_value("Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(response.get_header_value("Access-Control-Allow-Headers"),
            "authorization,content-type,x-stainless-os");
  EXPECT_EQ(response.get_header_value("Access-Control-Max-Age"), "600");
  EXPECT_TRUE(response.body.empty());

  httplib::Response delete_response;
  policy.answer_preflight(preflight("http://localhost:3000", "DELETE"), delete_response,
                          "GET, DELETE");
  EXPECT_EQ(delete_response.status, 200);
  EXPECT_EQ(delete_response.get_header_value("Access-Control-Allow-Methods"), "GET, DELETE");
  EXPECT_FALSE(delete_response.has_header("Access-Control-Allow-Headers"));
}

TEST(CorsPolicy, APreflightFromAnotherOriginOrForAnotherMethodIsRefused) {
  const CorsPolicy policy(kListed, false);
  httplib::Response response;
  try {
    policy.answer_preflight(preflight("https://evil.example", "POST"), response, "POST");
    FAIL() << "an origin not listed";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_THAT(error.what(),
                AllOf(HasSubstr("\"https://evil.example\""), HasSubstr("cors_allowed_origins")));
  }
  // Methods compare whole: "GE" is not GET, and "get" is not GET (methods are case-sensitive).
  for (const char* method : {"PUT", "GE", "get", "GET, DELETE"}) {
    try {
      policy.answer_preflight(preflight("https://chat.example.com", method), response,
                              "GET, DELETE");
      FAIL() << method;
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), 400);
      EXPECT_THAT(error.what(), AllOf(HasSubstr("/v1/chat/completions does not take method"),
                                      HasSubstr("it takes GET, DELETE")));
    }
  }
  EXPECT_FALSE(response.has_header("Access-Control-Allow-Methods"));
}

}  // namespace
}  // namespace headway::serving::http
