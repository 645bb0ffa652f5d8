// The parts of the bench report that are pure functions: outcomes per class, prediction beside
// measurement, and the workload limits.
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/report.h>
#include <headway/core/workload.h>
#include <headway/serving/bench/bench_summary.h>
#include <headway/serving/bench/prediction_comparison.h>
#include <headway/serving/bench/progress_reporter.h>
#include <headway/serving/bench/workload_limits.h>

#include <filesystem>
#include <sstream>

namespace headway::serving::bench {
namespace {

const std::filesystem::path kWorkload =
    std::filesystem::path(HEADWAY_SOURCE_DIR) / "tests/unit/serving/bench/data/two_classes.toml";

StreamResult ok_result(uint32_t tokens) {
  StreamResult r;
  r.first_token = 0.1;
  r.finish = 0.2;
  r.token_times.assign(tokens, 0.1);
  r.output_tokens = tokens;
  return r;
}

TEST(BenchSummary, CountsOutcomesPerClassAndKind) {
  const core::Workload workload = core::load_workload(kWorkload);
  BenchRun run;
  run.lateness.assign(workload.requests.size(), 0.002);
  run.lateness.back() = 0.010;
  size_t failed_chat = 0, short_document = 0;
  for (const core::WorkloadRequest& r : workload.requests) {
    const bool chat = workload.classes[r.class_index].name == "chat";
    if (chat && failed_chat < 2) {
      StreamResult failed;
      failed.failure = failed_chat == 0 ? FailureKind::kHttpStatus : FailureKind::kCutShort;
      failed.message = failed_chat == 0 ? "HTTP 429: slow down" : "cut";
      run.results.push_back(failed);
      ++failed_chat;
    } else if (!chat && short_document == 0) {
      run.results.push_back(ok_result(r.output_tokens - 1));
      ++short_document;
    } else {
      run.results.push_back(ok_result(r.output_tokens));
    }
  }
  const BenchSummary s = summarize_bench(workload, run, 16);
  ASSERT_EQ(s.classes.size(), 2u);
  EXPECT_EQ(s.classes[0].failed, 2u);
  EXPECT_EQ(s.classes[0].failures_by_kind[static_cast<size_t>(FailureKind::kHttpStatus)], 1u);
  EXPECT_EQ(s.classes[0].failures_by_kind[static_cast<size_t>(FailureKind::kCutShort)], 1u);
  EXPECT_NE(s.classes[0].first_failure.find("http_status: HTTP 429: slow down"), std::string::npos);
  EXPECT_EQ(s.classes[1].short_outputs, 1u);
  EXPECT_EQ(s.overall.sent, workload.requests.size());
  EXPECT_EQ(s.overall.succeeded, workload.requests.size() - 2);
  EXPECT_DOUBLE_EQ(s.lateness.max, 0.010);

  const nlohmann::json j = bench_summary_to_json(s);
  EXPECT_EQ(j["classes"][0]["name"], "chat");
  EXPECT_EQ(j["classes"][0]["failures"]["http_status"], 1);
  EXPECT_EQ(j["classes"][0]["failures"]["cut_short"], 1);
  EXPECT_EQ(j["overall"]["failed"], 2);
  EXPECT_DOUBLE_EQ(j["lateness"]["max"].get<double>(), 0.010);
  EXPECT_EQ(j["max_concurrency"], 16);

  std::ostringstream text;
  print_bench_summary(text, s);
  EXPECT_NE(text.str().find("http_status"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("first failure of chat"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("stream_error"), std::string::npos);  // kinds that did not occur
}

core::ClassReport class_report(const std::string& name, double ttft_p50, double ttft_p99,
                               double itl_p50, double itl_p99) {
  core::ClassReport c;
  c.name = name;
  c.ttft.p50 = ttft_p50;
  c.ttft.p99 = ttft_p99;
  c.itl.p50 = itl_p50;
  c.itl.p99 = itl_p99;
  return c;
}

TEST(PredictionComparison, RelativeErrorPerClassMatchedByName) {
  core::Report measured, predicted;
  measured.classes = {class_report("chat", 0.1, 0.4, 0.02, 0.05),
                      class_report("document", 2.0, 4.0, 0.02, 0.1)};
  measured.overall = class_report("overall", 0.2, 3.0, 0.02, 0.08);
  // The prediction lists its classes in another order, and misses nothing.
  predicted.classes = {class_report("document", 3.0, 3.0, 0.02, 0.1),
                       class_report("chat", 0.12, 0.2, 0.01, 0.05)};
  predicted.overall = class_report("overall", 0.2, 3.3, 0.0, 0.08);
  measured.classes[1].itl.p50 = 0;  // a zero measurement has no relative error

  const std::vector<PredictionRow> rows = compare_prediction(measured, predicted);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "chat");
  EXPECT_NEAR(*rows[0].ttft_p50.relative_error, 0.2, 1e-12);
  EXPECT_NEAR(*rows[0].ttft_p99.relative_error, -0.5, 1e-12);
  EXPECT_NEAR(*rows[0].itl_p50.relative_error, -0.5, 1e-12);
  EXPECT_NEAR(*rows[1].ttft_p50.relative_error, 0.5, 1e-12);
  EXPECT_FALSE(rows[1].itl_p50.relative_error);
  EXPECT_EQ(rows[2].name, "overall");
  EXPECT_NEAR(*rows[2].ttft_p99.relative_error, 0.1, 1e-12);

  const nlohmann::json j = prediction_to_json(rows);
  EXPECT_EQ(j[1]["name"], "document");
  EXPECT_DOUBLE_EQ(j[1]["ttft_p50"]["predicted"].get<double>(), 3.0);
  EXPECT_TRUE(j[1]["itl_p50"]["relative_error"].is_null());

  std::ostringstream text;
  print_prediction(text, "sim-tiny", rows);
  EXPECT_NE(text.str().find("sim-tiny"), std::string::npos);
  EXPECT_NE(text.str().find("+20%"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("-50%"), std::string::npos) << text.str();
}

TEST(PredictionComparison, AClassThePredictionLacksHasNoPredictedFigures) {
  core::Report measured, predicted;
  measured.classes = {class_report("chat", 0.1, 0.4, 0.02, 0.05)};
  const std::vector<PredictionRow> rows = compare_prediction(measured, predicted);
  EXPECT_TRUE(std::isnan(rows[0].ttft_p50.predicted));
  EXPECT_FALSE(rows[0].ttft_p50.relative_error);
}

TEST(WorkloadLimits, KeepAPrefixOfTheSameRequests) {
  const core::Workload workload = core::load_workload(kWorkload);
  const core::Workload first = limit_workload(workload, 5, 0);
  ASSERT_EQ(first.requests.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(first.requests[i].id, workload.requests[i].id);
    EXPECT_EQ(first.requests[i].prompt_tokens, workload.requests[i].prompt_tokens);
    EXPECT_EQ(first.requests[i].arrival, workload.requests[i].arrival);
  }
  EXPECT_EQ(limit_workload(workload, 0, 0).requests.size(), workload.requests.size());

  const double cut = workload.requests[10].arrival;
  const core::Workload early = limit_workload(workload, 0, cut);
  for (const core::WorkloadRequest& r : early.requests) EXPECT_LT(r.arrival, cut);
  EXPECT_LE(early.requests.size(), 10u);

  try {
    limit_workload(workload, 1000, 0);
    FAIL();
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--num-requests 1000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("only 24 requests"), std::string::npos) << e.what();
  }
  EXPECT_THROW(limit_workload(workload, 0, 1e-9), core::Error);
}

// A tiny --rate-scale stretches the arrivals past what a run can time: bench's clock wrapped (the
// requests went out at once, lateness negative) and simulate reported zero latencies. Refused,
// unless the requests kept still arrive in time.
TEST(WorkloadLimits, ARateScaleThatTakesTheArrivalsPastWhatCanBeTimedIsRefused) {
  const core::Workload workload = core::load_workload(kWorkload);
  const double first = workload.requests.front().arrival;
  const double last = workload.requests.back().arrival;
  ASSERT_GT(first, 0.0);
  ASSERT_GT(last, 4 * first);
  try {
    limit_workload(workload, 0, 0, 1e-300);
    FAIL();
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--rate-scale 1e-300"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("beyond the 1e9 s"), std::string::npos) << e.what();
  }
  // Slowed so that the first request arrives at half the limit: the whole workload would not be
  // timed, its first request is.
  const double slow = 2 * first / core::kMaxArrivalSeconds;
  EXPECT_THROW(limit_workload(workload, 0, 0, slow), core::Error);
  const core::Workload one = limit_workload(workload, 1, 0, slow);
  ASSERT_EQ(one.requests.size(), 1u);
  EXPECT_LE(one.requests[0].arrival, core::kMaxArrivalSeconds);
}

TEST(ProgressReporter, LineShowsCountsAndABarOnlyOnATerminal) {
  const std::string plain = ProgressReporter::line(40, 12, 10, 1, 3.3, false);
  EXPECT_EQ(plain, "bench: 10/40 finished (1 failed), 12 sent, 2 in flight, 3.3 s");
  const std::string bar = ProgressReporter::line(40, 12, 10, 1, 3.3, true);
  EXPECT_NE(bar.find("[#######"), std::string::npos) << bar;
}

TEST(ProgressReporter, PrintsAPlainFinalLineWhenNotATerminal) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  ProgressCounters counters;
  counters.sent = 3;
  counters.finished = 3;
  const RunClock clock;
  {
    ProgressReporter reporter(out, false, 3, counters, clock, 3600);
    reporter.stop();
  }
  std::rewind(out);
  char buffer[256] = {};
  ASSERT_NE(std::fgets(buffer, sizeof buffer, out), nullptr);
  EXPECT_NE(std::string(buffer).find("3/3 finished (0 failed)"), std::string::npos) << buffer;
  EXPECT_EQ(std::string(buffer).find('\r'), std::string::npos);
  std::fclose(out);
}

}  // namespace
}  // namespace headway::serving::bench
