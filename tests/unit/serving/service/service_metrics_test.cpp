// The metrics of LocalGenerationService after real traffic: promtool accepts the text, and the
// counters add up to exactly what was sent and generated.
#include <gtest/gtest.h>
#include <headway/serving/local_generation_service.h>

#include <map>
#include <regex>
#include <sstream>

#include "../metrics/promtool_check.h"
#include "service_fixture.h"

namespace headway::serving {
namespace {

// Sum of every sample of `metric` (exact name, any labels) whose labels contain `filter`.
double sum_of(const std::string& text, const std::string& metric, const std::string& filter = "") {
  double sum = 0.0;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (line.substr(0, name_end) != metric) continue;
    if (!filter.empty() && line.find(filter) == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

TEST(ServiceMetrics, CountersMatchTheTrafficAndPromtoolAcceptsTheText) {
  test::TinyCheckpoint checkpoint;
  LocalGenerationService service(test::tiny_deployment(
      checkpoint, "[[engines]]\ncount = 2\npool = \"main\"\nscheduler = \"chunked\"\n"));
  uint64_t prompt_tokens = 0;
  uint64_t generated = 0;
  constexpr int kRequests = 12;
  for (int i = 0; i < kRequests; ++i) {
    GenerateInput input = test::text_request(std::string(5 + i, 'm'), 3 + i % 4);
    input.request_class = i % 3 == 0 ? "long" : "short";
    const test::Collected out = test::collect(*service.submit(input));
    ASSERT_EQ(out.finish, Finish::kLength);
    prompt_tokens += out.usage.prompt_tokens;
    generated += out.usage.completion_tokens;
  }
  GenerateInput aborted = test::text_request("abort me", 1000);
  aborted.request_id = "to-abort";
  auto stream = service.submit(aborted);
  service.abort("to-abort");
  ASSERT_EQ(test::collect(*stream).finish, Finish::kAbort);
  test::wait_idle(service);

  const std::string text = service.metrics_text();
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "finished_reason=\"length\""), kRequests);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "finished_reason=\"abort\""), 1);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"long\""), 4);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"short\""), 8);
  // The aborted request's prompt counts once admitted; its tokens count as generated.
  EXPECT_EQ(sum_of(text, "headway_prompt_tokens_total"), prompt_tokens + 9);  // BOS + 8 bytes
  EXPECT_GE(sum_of(text, "headway_generation_tokens_total"), generated);
  EXPECT_EQ(sum_of(text, "headway_generation_tokens_total", "request_class=\"short\"") +
                sum_of(text, "headway_generation_tokens_total", "request_class=\"long\""),
            generated);
  // One TTFT per request that produced a token; ITL for every later token.
  EXPECT_EQ(sum_of(text, "headway_time_to_first_token_seconds_count", "request_class=\"short\"") +
                sum_of(text, "headway_time_to_first_token_seconds_count", "request_class=\"long\""),
            kRequests);
  EXPECT_EQ(sum_of(text, "headway_inter_token_latency_seconds_count", "request_class=\"short\"") +
                sum_of(text, "headway_inter_token_latency_seconds_count", "request_class=\"long\""),
            generated - kRequests);
  EXPECT_EQ(sum_of(text, "headway_e2e_request_latency_seconds_count"), kRequests + 1);
  // Every decode token of the finished requests was one slot of some step.
  EXPECT_GE(sum_of(text, "headway_iteration_decode_tokens_sum"), generated - kRequests);
  EXPECT_EQ(sum_of(text, "headway_num_requests_running"), 0);
  EXPECT_EQ(sum_of(text, "headway_num_requests_waiting"), 0);
  EXPECT_EQ(sum_of(text, "headway_kv_cache_usage_perc"), 0);
  EXPECT_EQ(sum_of(text, "headway_engine_alive"), 2);
  EXPECT_NE(text.find("engine=\"1\",pool=\"main\""), std::string::npos) << text;

  auto check = headway::test::promtool_check_metrics(text);
  if (!check) GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus')";
  EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << text;
}

// Clients choose request classes; past 16 distinct ones they share the label "other", so the number
// of series stays bounded.
TEST(ServiceMetrics, RequestClassLabelsAreBounded) {
  test::TinyCheckpoint checkpoint;
  LocalGenerationService service(test::tiny_deployment(checkpoint, "[[engines]]\n"));
  for (int i = 0; i < 20; ++i) {
    GenerateInput input = test::text_request("c", 1);
    input.request_class = "class" + std::to_string(i);
    ASSERT_EQ(test::collect(*service.submit(input)).finish, Finish::kLength);
  }
  test::wait_idle(service);
  const std::string text = service.metrics_text();
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"class15\""), 1);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"class16\""), 0);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"other\""), 4);
}

}  // namespace
}  // namespace headway::serving
