// Every way a request can fail reaches the client as an OpenAI error body with the right status,
// and the server keeps serving afterwards.
#include <algorithm>
#include <string>
#include <vector>

#include "http_test_support.h"
#include "openai_routes.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

TEST_F(HttpFrontendTest, MalformedJsonSaysWhere) {
  auto result = post_json("/v1/completions", R"({"prompt": "x" "max_tokens": 3})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  const json error = error_of(result->body);
  EXPECT_EQ(error["type"], "invalid_request_error");
  EXPECT_EQ(error["code"], 400);
  EXPECT_NE(error["message"].get<std::string>().find("(byte 27): parse error at line 1, column 27"),
            std::string::npos)
      << error;
  EXPECT_TRUE(service_.submitted().empty());
}

// Nesting is refused before the body is parsed: 15 million levels in an ignored field took 26 s
// and 0.7 GB before any check. The limit counts the body's own object: 128 levels pass, 129 do
// not; brackets inside strings do not count, and an escaped backslash ends no string early.
TEST_F(HttpFrontendTest, DeeplyNestedJsonIsRefusedNamingTheLimit) {
  const auto nested = [](const std::string& prompt, int levels) {
    return R"({"prompt": ")" + prompt + R"(", "max_tokens": 1, "ignored": )" +
           std::string(levels, '[') + std::string(levels, ']') + "}";
  };
  const auto refused_as_too_deep = [&](const std::string& body) {
    auto result = post_json("/v1/completions", body);
    if (!result) return ::testing::AssertionFailure() << "no answer";
    if (result->status != 400) return ::testing::AssertionFailure() << result->body;
    if (error_of(result->body)["message"].get<std::string>().find("more than 128 levels deep") ==
        std::string::npos) {
      return ::testing::AssertionFailure() << result->body;
    }
    return ::testing::AssertionSuccess();
  };
  for (const std::string& prompt : {std::string("x"), std::string(300, '[') + R"(\" {{ \\)"}) {
    auto shallow = post_json("/v1/completions", nested(prompt, 127));
    ASSERT_TRUE(shallow);
    EXPECT_EQ(shallow->status, 200) << shallow->body;
  }
  EXPECT_TRUE(refused_as_too_deep(nested("x", 128)));
  EXPECT_TRUE(refused_as_too_deep(nested("x", 1000000)));
  // The prompt's string ends at its quote after an escaped backslash: what follows is counted.
  EXPECT_TRUE(refused_as_too_deep(nested(R"(x\\)", 1000)));
}

TEST_F(HttpFrontendTest, InvalidUtf8IsRefused) {
  auto result = post_json("/v1/chat/completions",
                          "{\"messages\": [{\"role\": \"user\", \"content\": \"a\xc3\x28\"}]}");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  EXPECT_NE(error_of(result->body)["message"].get<std::string>().find("UTF-8"), std::string::npos);
}

TEST_F(HttpFrontendTest, WrongFieldTypeNamesTheField) {
  auto result = post_json("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "x"}], "top_p": "high"})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  const json error = error_of(result->body);
  EXPECT_EQ(error["param"], "top_p");
  EXPECT_NE(error["message"].get<std::string>().find("top_p must be a number"), std::string::npos);
}

TEST_F(HttpFrontendTest, UnsupportedFieldsAreRefused) {
  for (const char* body :
       {R"({"prompt": "x", "best_of": 2})", R"({"prompt": "x", "suffix": "s"})"}) {
    auto result = post_json("/v1/completions", body);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 400) << body;
    const std::string message = error_of(result->body)["message"];
    EXPECT_TRUE(message.find("not supported") != std::string::npos) << body << ": " << message;
  }
  EXPECT_TRUE(service_.submitted().empty());
}

// headway_request_rejected_total counts every refused request: those refused here, before
// submit(), are reported to the service, which counts its own refusals itself.
TEST_F(HttpFrontendTest, RequestsRefusedBeforeTheServiceAreCountedByIt) {
  ASSERT_TRUE(post_json("/v1/completions", R"({"prompt": "x" "max_tokens": 3})"));
  ASSERT_TRUE(post_json("/v1/completions", R"({"prompt": "x", "max_tokens": 0})"));
  ASSERT_TRUE(post_json("/v1/chat/completions", R"({"messages": "hi"})"));
  ASSERT_TRUE(
      client().Post("/v1/completions", httplib::MultipartFormDataItems{{"prompt", "x", "", ""}}));
  EXPECT_EQ(service_.refused_by_frontend(), 4u);
  service_.fail_submits_with(ServiceError(ErrorCode::kNotFound, "no such model", "model"));
  auto refused = post_json("/v1/completions", R"({"prompt": "x", "model": "other"})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 404);
  EXPECT_EQ(service_.refused_by_frontend(), 4u);
  EXPECT_TRUE(service_.submitted().empty());
}

struct ServiceFailure {
  ErrorCode code;
  int status;
  const char* type;
};

class ServiceErrorMapping : public HttpFrontendTest,
                            public ::testing::WithParamInterface<ServiceFailure> {};

TEST_P(ServiceErrorMapping, MapsToTheHttpStatus) {
  const ServiceFailure& failure = GetParam();
  service_.fail_submits_with(ServiceError(failure.code, "refused by the fake", "max_tokens"));
  for (const char* stream : {"false", "true"}) {
    auto result =
        post_json("/v1/completions", std::string(R"({"prompt": "x", "stream": )") + stream + "}");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, failure.status);
    const json error = error_of(result->body);
    EXPECT_EQ(error["message"], "refused by the fake");
    EXPECT_EQ(error["param"], "max_tokens");
    EXPECT_EQ(error["type"], failure.type);
    EXPECT_EQ(error["code"], failure.status);
    // A full queue says when to retry (the OpenAI SDKs read it); no other refusal does.
    EXPECT_EQ(result->get_header_value("Retry-After"), failure.status == 429 ? "1" : "");
  }
  // Where OpenAI's code string is what clients test, it replaces the number (both ways of
  // answering: the whole body and a stream's error).
  service_.fail_submits_with(
      ServiceError(failure.code, "refused by the fake", "prompt").with_openai_code("some_code"));
  for (const char* stream : {"false", "true"}) {
    auto result =
        post_json("/v1/completions", std::string(R"({"prompt": "x", "stream": )") + stream + "}");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, failure.status);
    EXPECT_EQ(error_of(result->body)["code"], "some_code");
  }
  service_.fail_submits_with(std::nullopt);
  auto good = post_json("/v1/completions", R"({"prompt": "x"})");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
}

// Each of n choices is a request of its own, and all wait at once: with more of them than the
// engines' waiting queues hold together, no retry could ever be admitted, so a full queue is the
// request's fault (400 naming n), not a 429 that the OpenAI SDKs retry. Where they would fit
// empty queues, or a queue is unbounded, the refusal stays a 429.
TEST_F(HttpFrontendTest, MoreChoicesThanTheWaitingQueuesHoldAreA400NamingN) {
  ClusterSummary cluster;
  cluster.engines = {EngineSummary{.index = 0, .max_waiting = 2},
                     EngineSummary{.index = 1, .max_waiting = 2}};
  service_.set_cluster(cluster);
  service_.fail_submits_with(
      ServiceError(ErrorCode::kResourceExhausted, "engine0's waiting queue is full"));
  auto refused = post_json("/v1/completions", R"({"prompt": "x", "n": 5})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  json error = error_of(refused->body);
  EXPECT_EQ(error["param"], "n");
  EXPECT_NE(error["message"].get<std::string>().find(
                "5 choices (n = 5) wait to be admitted at once, and the engines' waiting queues "
                "hold 4 requests in all"),
            std::string::npos)
      << error;
  // Two prompts of n = 3: six choices.
  refused = post_json("/v1/completions", R"({"prompt": ["x", "y"], "n": 3})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(error_of(refused->body)["message"].get<std::string>().find("6 choices (2 prompts x n"),
            std::string::npos)
      << refused->body;

  auto fits = post_json("/v1/completions", R"({"prompt": "x", "n": 4})");
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 429);
  cluster.engines[1].max_waiting = 0;  // unbounded
  service_.set_cluster(cluster);
  auto unbounded = post_json("/v1/completions", R"({"prompt": "x", "n": 5})");
  ASSERT_TRUE(unbounded);
  EXPECT_EQ(unbounded->status, 429);
}

INSTANTIATE_TEST_SUITE_P(
    Codes, ServiceErrorMapping,
    ::testing::Values(ServiceFailure{ErrorCode::kInvalidArgument, 400, "invalid_request_error"},
                      ServiceFailure{ErrorCode::kNotFound, 404, "not_found_error"},
                      ServiceFailure{ErrorCode::kResourceExhausted, 429, "rate_limit_error"},
                      ServiceFailure{ErrorCode::kUnavailable, 503, "service_unavailable_error"},
                      ServiceFailure{ErrorCode::kInternal, 500, "server_error"}));

// A batch's refusal names the prompt ("prompt[0]") and keeps OpenAI's code string.
TEST_F(HttpFrontendTest, ABatchsRefusalKeepsItsOpenAiCode) {
  service_.fail_submits_with(ServiceError(ErrorCode::kInvalidArgument, "too long", "prompt")
                                 .with_openai_code("context_length_exceeded"));
  auto refused = post_json("/v1/completions", R"({"prompt": ["x", "y"]})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  const json error = error_of(refused->body);
  EXPECT_EQ(error["param"], "prompt[0]");
  EXPECT_EQ(error["code"], "context_length_exceeded");
}

TEST_F(HttpFrontendTest, UnknownModelIs404) {
  auto result = post_json("/v1/completions", R"({"prompt": "x", "model": "gpt-9"})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 404);
  EXPECT_EQ(error_of(result->body)["param"], "model");
}

TEST_F(HttpFrontendTest, FailedGenerationIs500AndAbortedIs503) {
  service_.set_finish(Finish::kError, "engine 0 died");
  auto failed = post_json("/v1/completions", R"({"prompt": "x"})");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 500);
  EXPECT_NE(error_of(failed->body)["message"].get<std::string>().find("engine 0 died"),
            std::string::npos);

  service_.set_finish(Finish::kAbort, "draining");
  auto aborted =
      post_json("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(aborted);
  EXPECT_EQ(aborted->status, 503);
  EXPECT_EQ(error_of(aborted->body)["type"], "service_unavailable_error");
}

TEST_F(HttpFrontendTest, UnknownRouteIs404AndWrongMethodIs405) {
  auto unknown = client().Get("/v2/completions");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(error_of(unknown->body)["message"].get<std::string>().find("/v2/completions"),
            std::string::npos);
  auto unknown_post = post_json("/v1/embeddings", R"({"input": "x"})");
  ASSERT_TRUE(unknown_post);
  EXPECT_EQ(unknown_post->status, 404);

  auto get_completions = client().Get("/v1/completions");
  ASSERT_TRUE(get_completions);
  EXPECT_EQ(get_completions->status, 405);
  EXPECT_EQ(get_completions->get_header_value("Allow"), "POST");
  error_of(get_completions->body);
  auto delete_models = client().Delete("/v1/models");
  ASSERT_TRUE(delete_models);
  EXPECT_EQ(delete_models->status, 405);
  EXPECT_EQ(delete_models->get_header_value("Allow"), "GET");
  // A POST without a body (curl -X POST) fails in cpp-httplib before routing: still a 405.
  const std::string bodiless =
      raw_exchange(port(), "POST /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(bodiless.starts_with("HTTP/1.1 405")) << bodiless;
  EXPECT_NE(bodiless.find("Allow: GET"), std::string::npos) << bodiless;
}

// The 404's list of routes comes from the table install() registers: every route is in it (it
// once left out GET /version), and each route it names is served (answered by its handler, not
// the 404 for an unknown route).
TEST_F(HttpFrontendTest, TheUnknownRouteMessageListsEveryRoute) {
  auto unknown = client().Get("/v1/foo");
  ASSERT_TRUE(unknown);
  ASSERT_EQ(unknown->status, 404);
  const std::string message = error_of(unknown->body)["message"];
  // "...; the routes are A, B and C", read back into its entries.
  const std::string intro = "; the routes are ";
  ASSERT_NE(message.find(intro), std::string::npos) << message;
  std::string list = message.substr(message.find(intro) + intro.size());
  if (const size_t last = list.rfind(" and "); last != std::string::npos) {
    list.replace(last, 5, ", ");
  }
  std::vector<std::string> listed;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(", ", start), list.size());
    listed.push_back(list.substr(start, comma - start));
    start = comma + 2;
  }
  const std::vector<std::string> routes = http::OpenAiRoutes::route_names();
  EXPECT_EQ(listed, routes) << message;
  EXPECT_NE(std::find(routes.begin(), routes.end(), "GET /version"), routes.end());
  for (const std::string& route : routes) {
    SCOPED_TRACE(route);
    const size_t space = route.find(' ');
    const std::string method = route.substr(0, space);
    std::string path = route.substr(space + 1);
    if (const size_t id = path.find("{id}"); id != std::string::npos) path.replace(id, 4, "x");
    httplib::Result answer = method == "GET"      ? client().Get(path)
                             : method == "DELETE" ? client().Delete(path)
                                                  : post_json(path, "{}");
    ASSERT_TRUE(answer);
    const std::string body = answer->body;
    EXPECT_FALSE(answer->status == 404 && body.find("no route") != std::string::npos) << body;
  }
}

TEST_F(HttpFrontendTest, OversizedBodyIs413) {
  const std::string big = R"({"prompt": ")" + std::string(kHttpMaxBodyBytes, 'a') + R"("})";
  auto result = post_json("/v1/completions", big);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 413);
  EXPECT_NE(error_of(result->body)["message"].get<std::string>().find("larger than"),
            std::string::npos);
  EXPECT_TRUE(service_.submitted().empty());
  auto good = post_json("/v1/completions", R"({"prompt": "x"})");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
}

// Bodies cpp-httplib takes before any handler sees them get a message saying what to send: a
// form-encoded body (curl -d's default type) over its 8 KiB cap, a multipart one (curl -F), and a
// POST without a length (curl -X POST with no data).
TEST_F(HttpFrontendTest, BodiesTheHttpLibraryRefusesSayWhatToSend) {
  const std::string body = R"({"prompt": "x", "pad": ")" + std::string(9000, 'b') + R"("})";
  auto form = client().Post("/v1/completions", body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 413);
  EXPECT_NE(
      error_of(form->body)["message"].get<std::string>().find("Content-Type: application/json"),
      std::string::npos)
      << form->body;
  // The same body as JSON is served.
  auto json = post_json("/v1/completions", body);
  ASSERT_TRUE(json);
  EXPECT_EQ(json->status, 200) << json->body;

  httplib::MultipartFormDataItems items = {{"prompt", "x", "", ""}};
  auto multipart = client().Post("/v1/completions", items);
  ASSERT_TRUE(multipart);
  EXPECT_EQ(multipart->status, 400);
  EXPECT_NE(error_of(multipart->body)["message"].get<std::string>().find("multipart"),
            std::string::npos)
      << multipart->body;

  const std::string no_length =
      raw_exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(no_length.starts_with("HTTP/1.1 400")) << no_length;
  EXPECT_NE(no_length.find("needs a body with a Content-Length header"), std::string::npos)
      << no_length;
  // A chunked body gets 411, so the message must not offer chunked encoding as the way out.
  EXPECT_EQ(no_length.find("chunked"), std::string::npos) << no_length;
  EXPECT_EQ(service_.submitted().size(), 1u);  // only the JSON one
}

TEST_F(HttpFrontendTest, GarbageOnTheWireGets400AndTheServerKeepsServing) {
  const std::string garbage[] = {
      "GARBAGE\r\n\r\n",
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",  // a TLS hello on the plain port
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n{}",
      "POST /v1/completions HTTP/9.9\r\n\r\n",
      "GET /health HTTP/1.1\r\n" + std::string(300000, 'X') + "\r\n\r\n",
  };
  for (const std::string& bytes : garbage) {
    // cpp-httplib keeps even a confused connection open for its keep-alive time, so read up to
    // the end of the error body (or a close) rather than to the close.
    RawConnection connection(port());
    connection.send(bytes);
    const std::string response = connection.read_until("}}");
    // Either a 4xx or a closed connection; never a 2xx, and never a crash.
    EXPECT_TRUE(response.empty() || response.starts_with("HTTP/1.1 4")) << response;
  }
  RawConnection connection(port());
  connection.send("GARBAGE\r\n\r\n");
  const std::string malformed = connection.read_until("}}");
  ASSERT_TRUE(malformed.starts_with("HTTP/1.1 400")) << malformed;
  EXPECT_NE(malformed.find("\"invalid_request_error\""), std::string::npos) << malformed;
  EXPECT_NE(malformed.find("malformed HTTP request"), std::string::npos) << malformed;
  // A bad version is malformed too, not a POST that lacks a body.
  const std::string bad_version =
      raw_exchange(port(), "POST /v1/completions HTTP/9.9\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(bad_version.find("needs a body"), std::string::npos) << bad_version;

  auto good = post_json("/v1/completions", R"({"prompt": "x"})");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
}

TEST_F(HttpFrontendTest, ARawRequestWithConnectionCloseIsAnswered) {
  const std::string body = R"({"prompt": "hi", "max_tokens": 2})";
  const std::string response = raw_exchange(
      port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(response.starts_with("HTTP/1.1 200")) << response;
  EXPECT_NE(response.find("\"text\":\"ab\""), std::string::npos) << response;
}

}  // namespace
}  // namespace headway::serving::testing
