// The spread of a comparison over seeds, from hand-made comparison rows: medians and ranges per
// figure, seeds without a figure left out and counted, ratios and "better" counted seed by seed
// against the first deployment.
#include "headway/core/seed_sweep.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "headway/core/error.h"

namespace headway::core {
namespace {

constexpr double kEps = 1e-12;

ComparisonRow row(const std::string& name, double short_ttft_p99, std::optional<double> hol,
                  double goodput, uint64_t preemptions = 0) {
  ComparisonRow r;
  r.deployment = name;
  r.short_ttft_p99 = short_ttft_p99;
  r.long_ttft_p99 = 2 * short_ttft_p99;
  r.short_itl_p99 = 0.1;
  r.hol_factor = hol;
  r.output_tokens_per_s = 1000;
  r.goodput_requests_per_s = goodput;
  r.preemptions = preemptions;
  return r;
}

Comparison seed(ComparisonRow base, ComparisonRow other) {
  Comparison c;
  c.slo = "ttft=2s";
  c.rows = {std::move(base), std::move(other)};
  return c;
}

// Three seeds: "other" beats the base on short TTFT in two of them, ties in goodput in one.
std::vector<Comparison> three_seeds() {
  return {seed(row("base", 10.0, 30.0, 4.0), row("other", 2.0, 5.0, 5.0, 7)),
          seed(row("base", 4.0, 12.0, 4.0), row("other", 6.0, 9.0, 4.0)),
          seed(row("base", 8.0, std::nullopt, 5.0), row("other", 1.0, std::nullopt, 6.0, 1482))};
}

TEST(SeedSweep, MedianAndRangeOfEachFigure) {
  const SeedSweep sweep = summarize_seeds({1, 2, 3}, three_seeds());
  ASSERT_EQ(sweep.rows.size(), 2u);
  EXPECT_EQ(sweep.slo, "ttft=2s");
  const SeedSweepRow& base = sweep.rows[0];
  EXPECT_EQ(base.deployment, "base");
  EXPECT_NEAR(base.short_ttft_p99.median, 8.0, kEps);
  EXPECT_NEAR(base.short_ttft_p99.min, 4.0, kEps);
  EXPECT_NEAR(base.short_ttft_p99.max, 10.0, kEps);
  EXPECT_EQ(base.short_ttft_p99.seeds, 3u);
  EXPECT_NEAR(base.long_ttft_p99.median, 16.0, kEps);
  // Seed 3 drew no long request: its HOL factor is left out, and the spread says so.
  EXPECT_EQ(base.hol_factor.seeds, 2u);
  EXPECT_NEAR(base.hol_factor.median, 21.0, kEps);    // between 12 and 30
  EXPECT_EQ(base.short_ttft_p99_vs.ratio.seeds, 0u);  // the baseline is not compared to itself

  const SeedSweepRow& other = sweep.rows[1];
  EXPECT_NEAR(other.preemptions.max, 1482.0, kEps);
  EXPECT_NEAR(other.preemptions.median, 7.0, kEps);
  // Ratios 0.2, 1.5, 0.125: better (lower) in two seeds of three.
  EXPECT_EQ(other.short_ttft_p99_vs.better, 2u);
  EXPECT_EQ(other.short_ttft_p99_vs.ratio.seeds, 3u);
  EXPECT_NEAR(other.short_ttft_p99_vs.ratio.median, 0.2, kEps);
  EXPECT_NEAR(other.short_ttft_p99_vs.ratio.max, 1.5, kEps);
  // Goodput 5/4, 4/4 (a tie is not better), 6/5: higher is better.
  EXPECT_EQ(other.goodput_vs.better, 2u);
  EXPECT_EQ(other.goodput_vs.compared, 3u);
  EXPECT_NEAR(other.goodput_vs.ratio.min, 1.0, kEps);
  EXPECT_EQ(other.short_ttft_p99_vs.compared, 3u);
}

// Within 1% of the baseline is a tie, not a win: two deployments that met the same requests differ
// in goodput by the last finish's milliseconds (3.52199 against 3.52179 req/s, seen in a walk).
TEST(SeedSweep, ADifferenceWithinOnePercentIsATie) {
  const std::vector<Comparison> per_seed = {
      seed(row("base", 1.000, 3.0, 3.52179), row("other", 0.995, 3.0, 3.52199)),
      seed(row("base", 1.000, 3.0, 3.52179), row("other", 0.980, 3.0, 3.60000))};
  const SeedSweep sweep = summarize_seeds({1, 2}, per_seed);
  const SeedSweepRow& other = sweep.rows[1];
  EXPECT_EQ(other.goodput_vs.compared, 2u);
  EXPECT_EQ(other.goodput_vs.better, 1u);         // 3.60 is 2.2% higher; 3.52199 ties
  EXPECT_EQ(other.short_ttft_p99_vs.better, 1u);  // 0.98 is 2% lower; 0.995 ties
}

// A baseline that met the SLO for nobody (goodput 0) has no ratio, but beating it still counts.
TEST(SeedSweep, BeatingABaselineGoodputOfZeroCounts) {
  std::vector<Comparison> per_seed = three_seeds();
  per_seed[0].rows[0].goodput_requests_per_s = 0.0;
  const SeedSweep sweep = summarize_seeds({1, 2, 3}, per_seed);
  const SeedRatio& goodput = sweep.rows[1].goodput_vs;
  EXPECT_EQ(goodput.compared, 3u);
  EXPECT_EQ(goodput.better, 2u);       // 5 > 0 and 6 > 5; 4 = 4 is a tie
  EXPECT_EQ(goodput.ratio.seeds, 2u);  // no ratio to a zero
  std::ostringstream out;
  print_seed_sweep(out, sweep);
  EXPECT_NE(out.str().find("2/3"), std::string::npos) << out.str();
}

TEST(SeedSweep, SeedsThatCompareOtherDeploymentsAreRefused) {
  std::vector<Comparison> per_seed = three_seeds();
  per_seed[1].rows[1].deployment = "renamed";
  EXPECT_THROW(summarize_seeds({1, 2, 3}, per_seed), Error);
  EXPECT_THROW(summarize_seeds({1, 2}, three_seeds()), Error);
  EXPECT_TRUE(summarize_seeds({}, {}).rows.empty());
}

TEST(SeedSweep, PrintsTheSpreadAndTheSeedBySeedTable) {
  std::ostringstream out;
  print_seed_sweep(out, summarize_seeds({1, 2, 3}, three_seeds()));
  const std::string text = out.str();
  for (const char* part :
       {"seeds 1-3", "median", "range", "4.00s-10.00s", "21.00*", "vs base", "x0.20 2/3", "1482",
        "ttft=2s", "* = over fewer seeds", "better = lower latency"}) {
    EXPECT_NE(text.find(part), std::string::npos) << "missing \"" << part << "\" in\n" << text;
  }
  const nlohmann::json j = seed_sweep_to_json(summarize_seeds({1, 2, 3}, three_seeds()));
  EXPECT_EQ(j["baseline"], "base");
  EXPECT_EQ(j["seeds"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["hol_factor"]["seeds"], 2);
  EXPECT_TRUE(j["rows"][0]["vs_baseline"].is_null());
  EXPECT_EQ(j["rows"][1]["vs_baseline"]["short_ttft_p99"]["better"], 2);
  EXPECT_EQ(j["rows"][1]["vs_baseline"]["goodput"]["compared"], 3);

  // Preemptions 0, 0, 7 and 1482 over four seeds: the median, 3.5, is not rounded to a count.
  std::vector<Comparison> four = three_seeds();
  four.push_back(seed(row("base", 9.0, 20.0, 4.0), row("other", 3.0, 6.0, 5.0, 0)));
  std::ostringstream even;
  print_seed_sweep(even, summarize_seeds({1, 2, 3, 4}, four));
  EXPECT_NE(even.str().find("3.5"), std::string::npos) << even.str();
}

}  // namespace
}  // namespace headway::core
