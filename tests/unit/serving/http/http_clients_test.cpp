// The frontend against the clients people use by hand or in scripts: curl (-N for streams) and
// Python's standard library, run as subprocesses.
#include <thread>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

bool have(const std::string& program) {
  return run_command("command -v " + program + " >/dev/null 2>&1 && echo yes").output == "yes\n";
}

class CurlTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    if (!have("curl")) GTEST_SKIP() << "curl is not installed";
    HttpFrontendTest::SetUp();
  }
  // Runs curl on `path` with the body; returns the response body, then the status on the last
  // line (curl -w).
  CommandResult curl(const std::string& path, const std::string& body,
                     const std::string& extra = "") const {
    TempFile file(body);
    return run_command("curl -sS -N --max-time 30 -H 'Content-Type: application/json' " + extra +
                       " --data-binary @" + file.path() + " -w '\\n%{http_code}' " + base_url() +
                       path);
  }
};

// The status curl printed last, and the body before it.
std::pair<std::string, std::string> split_status(const std::string& output) {
  const size_t newline = output.rfind('\n');
  return {output.substr(0, newline), output.substr(newline + 1)};
}

TEST_F(CurlTest, Completion) {
  const CommandResult result = curl("/v1/completions", R"({"prompt": "hi", "max_tokens": 3})");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto [body, status] = split_status(result.output);
  EXPECT_EQ(status, "200");
  const json parsed = json::parse(body);
  EXPECT_EQ(parsed["choices"][0]["text"], "abc");
  EXPECT_EQ(parsed["choices"][0]["finish_reason"], "length");
}

TEST_F(CurlTest, ChatStream) {
  const CommandResult result =
      curl("/v1/chat/completions",
           R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": true})");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto [body, status] = split_status(result.output);
  EXPECT_EQ(status, "200");
  const auto data = sse_data(body);
  ASSERT_GE(data.size(), 3u) << body;
  EXPECT_EQ(data.back(), "[DONE]");
  std::string content;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json delta = json::parse(data[i])["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, "abcd");
}

TEST_F(CurlTest, BadJsonAndMissingKey) {
  const CommandResult bad = curl("/v1/completions", "{\"prompt\": ");
  const auto [bad_body, bad_status] = split_status(bad.output);
  EXPECT_EQ(bad_status, "400");
  EXPECT_NE(error_of(bad_body)["message"].get<std::string>().find("not valid JSON"),
            std::string::npos);

  start_frontend("k");
  const auto [denied_body, denied_status] =
      split_status(curl("/v1/completions", R"({"prompt": "x"})").output);
  EXPECT_EQ(denied_status, "401");
  error_of(denied_body);
  const auto [ok_body, ok_status] = split_status(
      curl("/v1/completions", R"({"prompt": "x"})", "-H 'Authorization: Bearer k'").output);
  EXPECT_EQ(ok_status, "200") << ok_body;
}

TEST_F(CurlTest, MetricsAndHealth) {
  const CommandResult metrics = run_command("curl -sS --max-time 30 " + base_url() + "/metrics");
  // The service's metrics first, then the frontend's own.
  EXPECT_TRUE(metrics.output.starts_with(
      "# TYPE headway_requests_total counter\nheadway_requests_total 3\n"))
      << metrics.output;
  const CommandResult health = run_command(
      "curl -sS --max-time 30 -o /dev/null -w '%{http_code}' " + base_url() + "/health");
  EXPECT_EQ(health.output, "200");
}

class PythonClientTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    if (!have("python3")) GTEST_SKIP() << "python3 is not installed";
    HttpFrontendTest::SetUp();
  }
  json python(const std::string& check, const std::string& key = "") const {
    const CommandResult result = run_command("python3 " HEADWAY_HTTP_PY_CLIENT " " + base_url() +
                                             " " + check + (key.empty() ? "" : " " + key));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return json::parse(result.output);
  }
};

TEST_F(PythonClientTest, Completion) {
  const json got = python("completion");
  EXPECT_EQ(got["status"], 200);
  EXPECT_EQ(got["object"], "text_completion");
  EXPECT_EQ(got["text"], "abcdef");
  EXPECT_EQ(got["finish_reason"], "length");
  EXPECT_EQ(got["usage"]["total_tokens"], 13);
}

TEST_F(PythonClientTest, ChatStreamWithUsage) {
  service_.set_finish(Finish::kStop);
  const json got = python("chat_stream");
  EXPECT_EQ(got["status"], 200);
  EXPECT_EQ(got["content_type"], "text/event-stream");
  EXPECT_EQ(got["role"], "assistant");
  EXPECT_EQ(got["content"], "abc");
  EXPECT_EQ(got["finish_reason"], "stop");
  EXPECT_EQ(got["usage"]["completion_tokens"], 3);
  EXPECT_EQ(got["done"], true);
}

TEST_F(PythonClientTest, BadRequestNamesTheField) {
  const json got = python("bad_request");
  EXPECT_EQ(got["status"], 400);
  EXPECT_EQ(got["error"]["param"], "messages[0].content");
  EXPECT_EQ(got["error"]["type"], "invalid_request_error");
}

TEST_F(PythonClientTest, ApiKey) {
  start_frontend("py-key");
  EXPECT_EQ(python("completion", "py-key")["status"], 200);
  EXPECT_EQ(python("completion", "wrong")["status"], 401);
}

TEST_F(PythonClientTest, DroppedStreamIsAborted) {
  service_.set_hold(true);
  json got;
  std::thread client([&] { got = python("disconnect"); });
  const bool submitted = service_.wait_for_submits(1, kPatienceSeconds);
  std::string id;
  if (submitted) {
    id = service_.submitted()[0].request_id;
    service_.push(id, 1);
  }
  client.join();
  ASSERT_TRUE(submitted);
  EXPECT_EQ(got["id"], id);
  EXPECT_TRUE(service_.wait_for_abort(id, kPatienceSeconds));
}

}  // namespace
}  // namespace headway::serving::testing
