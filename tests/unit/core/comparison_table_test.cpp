// Comparison rows from hand-made reports: which figure lands in which column, and the ratios to
// the first (baseline) row.
#include "headway/core/comparison_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "headway/core/error.h"

namespace headway::core {
namespace {

constexpr double kEps = 1e-12;

LatencySummary p50_p99(double p50, double p99) {
  LatencySummary s;
  s.count = 10;
  s.p50 = p50;
  s.p99 = p99;
  return s;
}

Report hand_report(double short_p99_ttft, double long_p99_ttft, double tokens_per_s,
                   double goodput_rate, double kv_p99 = 0) {
  Report r;
  r.short_group.ttft = p50_p99(0.1, short_p99_ttft);
  r.short_group.itl = p50_p99(0.02, 0.2);
  r.long_group.ttft = p50_p99(5.0, long_p99_ttft);
  r.hol_factor = short_p99_ttft / 0.5;
  r.stall_factor = 1.5;
  r.overall.output_tokens_per_s = tokens_per_s;
  r.goodput = Goodput{"ttft=2s,tpot=100ms", 90, 100, goodput_rate};
  if (kv_p99 > 0) {
    r.overall.kv_transfer = p50_p99(kv_p99 / 2, kv_p99);
    r.overall.kv_wait = p50_p99(kv_p99 * 10, kv_p99 * 100);
  }
  return r;
}

TEST(Comparison, RowsAndRatiosToTheBaseline) {
  const Report base = hand_report(10.0, 20.0, 1000.0, 4.0);
  Report better = hand_report(2.5, 25.0, 950.0, 5.0, 0.03);
  better.preemptions = 17;
  const Comparison c = compare_reports({{"base", &base}, {"better", &better}});
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.slo, "ttft=2s,tpot=100ms");

  const ComparisonRow& b = c.rows[0];
  EXPECT_EQ(b.deployment, "base");
  EXPECT_NEAR(b.short_ttft_p50, 0.1, kEps);
  EXPECT_NEAR(b.short_ttft_p99, 10.0, kEps);
  EXPECT_NEAR(b.long_ttft_p50, 5.0, kEps);
  EXPECT_NEAR(b.long_ttft_p99, 20.0, kEps);
  EXPECT_NEAR(b.short_itl_p99, 0.2, kEps);
  EXPECT_NEAR(*b.hol_factor, 20.0, kEps);
  EXPECT_NEAR(*b.stall_factor, 1.5, kEps);
  EXPECT_NEAR(*b.goodput_requests_per_s, 4.0, kEps);
  EXPECT_EQ(b.kv_transfers, 0u);
  EXPECT_FALSE(b.throughput_change);  // the baseline is not compared with itself
  EXPECT_FALSE(b.short_ttft_p99_ratio);

  const ComparisonRow& r = c.rows[1];
  EXPECT_NEAR(*r.throughput_change, -0.05, kEps);
  EXPECT_NEAR(*r.goodput_ratio, 1.25, kEps);
  EXPECT_NEAR(*r.short_ttft_p99_ratio, 0.25, kEps);
  EXPECT_NEAR(*r.long_ttft_p99_ratio, 1.25, kEps);
  EXPECT_NEAR(*r.short_itl_p99_ratio, 1.0, kEps);
  EXPECT_EQ(r.kv_transfers, 10u);
  EXPECT_EQ(b.preemptions, 0u);
  EXPECT_EQ(r.preemptions, 17u);
  EXPECT_EQ(comparison_to_json(c)["rows"][1]["preemptions"], 17);
  EXPECT_NEAR(r.kv_transfer_p99, 0.03, kEps);
  EXPECT_NEAR(r.kv_wait_p99, 3.0, kEps);
  EXPECT_NEAR(comparison_to_json(c)["rows"][1]["kv_wait_p99"].get<double>(), 3.0, kEps);
  EXPECT_TRUE(comparison_to_json(c)["rows"][0]["kv_wait_p99"].is_null());
}

TEST(Comparison, MissingFiguresStayMissing) {
  Report base = hand_report(10.0, 20.0, 1000.0, 4.0);
  Report no_long;  // every latency NaN, no goodput, no factors
  no_long.overall.output_tokens_per_s = 0;
  const Comparison c = compare_reports({{"base", &base}, {"empty", &no_long}});
  const ComparisonRow& r = c.rows[1];
  EXPECT_TRUE(std::isnan(r.long_ttft_p99));
  EXPECT_FALSE(r.goodput_requests_per_s);
  EXPECT_FALSE(r.goodput_ratio);
  EXPECT_FALSE(r.long_ttft_p99_ratio);
  EXPECT_FALSE(r.hol_factor);
  ASSERT_TRUE(r.throughput_change);
  EXPECT_NEAR(*r.throughput_change, -1.0, kEps);
  const nlohmann::json j = comparison_to_json(c);
  EXPECT_TRUE(j["rows"][1]["long_ttft_p99"].is_null());
  EXPECT_TRUE(j["rows"][1]["vs_baseline"]["goodput_ratio"].is_null());
  EXPECT_EQ(j["baseline"], "base");

  EXPECT_THROW(compare_reports({{"null", nullptr}}), Error);
}

TEST(Comparison, PrintsOneRowPerDeploymentAndTheRelativeTable) {
  const Report base = hand_report(10.0, 20.0, 1000.0, 4.0);
  Report other = hand_report(2.5, 25.0, 950.0, 5.0, 0.03);
  other.preemptions = 1482;
  std::ostringstream out;
  print_comparison(out, compare_reports({{"base-line", &base}, {"other-one", &other}}));
  const std::string text = out.str();
  for (const char* part : {"short TTFT", "long TTFT",   "HOL",       "stall",
                           "goodput",    "KV transfer", "base-line", "other-one",
                           "10.00s",     "25.00s",      "20.00",     "vs base-line",
                           "-5.0%",      "x1.25",       "x0.25",     "ttft=2s,tpot=100ms",
                           "preempt-",   "1482",        "KV wait",   "3.00s"}) {
    EXPECT_NE(text.find(part), std::string::npos) << "missing \"" << part << "\" in\n" << text;
  }
  // The footer's KV wait is report.h's and workloads.md's: simulated transfers take turns on their
  // links, so waiting behind another one is part of it (the operator's walkthrough).
  EXPECT_NE(text.find("KV wait (after the prefill, until the transfer could start: room on the "
                      "decode engine, the end of its step, and the transfers before it on its "
                      "links, which carry one at a time)"),
            std::string::npos)
      << text;
  EXPECT_EQ(comparison_to_json(compare_reports({{"a", &base}, {"b", &other}}))["rows"].size(), 2u);
}

}  // namespace
}  // namespace headway::core
