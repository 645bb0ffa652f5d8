// The capacity search: on a synthetic probe with a known threshold (bracketing, precision, run
// budget), and on real simulations of a cheap deployment, where the SLO must hold at the factor
// found and fail at the next step.
#include "headway/core/capacity_search.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>

#include "headway/core/error.h"
#include "headway/core/plugin_registry.h"
#include "headway/core/simulator.h"
#include "headway/core/workload_scaling.h"

namespace headway::core {
namespace {

namespace fs = std::filesystem;

// Holds exactly for factors <= threshold.
std::function<SloP99(double)> threshold_probe(double threshold, size_t* calls) {
  return [=](double f) {
    ++*calls;
    SloP99 p{f, 0, std::nan("")};
    p.holds = f <= threshold;
    return p;
  };
}

TEST(CapacitySearch, BracketsAThresholdAboveTheStart) {
  size_t calls = 0;
  const Capacity c = search_capacity(threshold_probe(3.3, &calls), default_slo());
  EXPECT_LE(c.factor, 3.3);
  EXPECT_GT(c.failing_factor, 3.3);
  EXPECT_LE(c.failing_factor / c.factor, 1.05 + 1e-12);
  EXPECT_EQ(calls, c.probes.size());
  EXPECT_LE(calls, CapacityOptions{}.max_runs);
}

TEST(CapacitySearch, BracketsAThresholdBelowTheStart) {
  size_t calls = 0;
  const Capacity c = search_capacity(threshold_probe(0.07, &calls), default_slo());
  EXPECT_LE(c.factor, 0.07);
  EXPECT_GT(c.failing_factor, 0.07);
  EXPECT_LE(c.failing_factor / c.factor, 1.05 + 1e-12);
}

TEST(CapacitySearch, NeverHoldingAndNeverFailingAreReported) {
  size_t calls = 0;
  const Capacity none = search_capacity(threshold_probe(1e-9, &calls), default_slo());
  EXPECT_EQ(none.factor, 0.0);
  // 1/1024 to the four digits a factor is probed at.
  EXPECT_EQ(none.failing_factor, 0.0009766);

  CapacityOptions small;
  small.max_factor = 8;
  const Capacity all = search_capacity(threshold_probe(1e9, &calls), default_slo(), small);
  EXPECT_EQ(all.factor, 8.0);
  EXPECT_TRUE(std::isinf(all.failing_factor));
  // Held up to the ceiling: a lower bound, which the report marks (">=", "lower_bound").
  EXPECT_TRUE(all.lower_bound());
  EXPECT_EQ(capacity_to_json(all)["lower_bound"], true);
  EXPECT_FALSE(none.lower_bound());
  EXPECT_FALSE(search_capacity(threshold_probe(3.3, &calls), default_slo()).lower_bound());

  CapacityOptions one_run;
  one_run.max_runs = 1;
  EXPECT_EQ(search_capacity(threshold_probe(3.3, &calls), default_slo(), one_run).probes.size(),
            1u);
  CapacityOptions bad;
  bad.precision = 0;
  EXPECT_THROW(search_capacity(threshold_probe(1, &calls), default_slo(), bad), Error);
  // Outside [1e-9, 1e9] the rounding to printed digits is no longer exact.
  CapacityOptions tiny;
  tiny.min_factor = 1e-12;
  EXPECT_THROW(search_capacity(threshold_probe(1, &calls), default_slo(), tiny), Error);
  CapacityOptions huge;
  huge.max_factor = 1e12;
  EXPECT_THROW(search_capacity(threshold_probe(1, &calls), default_slo(), huge), Error);

  // The floor holds the factor as asked: 2^-9 is probed (as 0.001953) though its rounding is
  // under a floor of exactly 1/512.
  CapacityOptions floor;
  floor.min_factor = 1.0 / 512;
  EXPECT_EQ(search_capacity(threshold_probe(1e-9, &calls), default_slo(), floor).failing_factor,
            0.001953);
}

// `--rate-scale F` with a factor the report printed must replay that probe: near a capacity the
// p99 is not smooth in the factor (on document_qa, moved_big_decode held at 2^(3/4) = 1.68179...
// with p99 TTFT 1.93 s, printed as 1.682, where --rate-scale 1.682 gave 7.77 s). So every factor
// probed is one whose printed text parses back to it, bisection midpoints included.
TEST(CapacitySearch, ProbesRunAtTheFactorsTheyPrint) {
  size_t calls = 0;
  CapacityOptions odd_start;
  odd_start.start_factor = 1.2345678;
  for (const auto& [threshold, options] :
       {std::pair{3.3, CapacityOptions{}}, std::pair{0.07, CapacityOptions{}},
        std::pair{1e-9, CapacityOptions{}}, std::pair{1e9, CapacityOptions{}},
        std::pair{1.7, odd_start}}) {
    const Capacity c = search_capacity(threshold_probe(threshold, &calls), default_slo(), options);
    for (const CapacityProbe& p : c.probes) {
      const std::string text = capacity_factor_text(p.factor);
      EXPECT_EQ(std::stod(text), p.factor) << text << " at threshold " << threshold;
      // At most four significant digits, whatever prints it.
      EXPECT_EQ(std::stod(fmt::format("{:.4g}", p.factor)), p.factor) << p.factor;
    }
  }
  const Capacity c = search_capacity(threshold_probe(1.7, &calls), default_slo());
  ASSERT_EQ(c.probes.size(), 6u);  // 1, 2, then the midpoints 2^(1/2), 2^(3/4), ...
  EXPECT_EQ(c.probes[3].factor, 1.682);
  EXPECT_EQ(capacity_factor_text(c.probes[3].factor), "1.682");

  EXPECT_EQ(capacity_factor_text(1), "1.000");
  EXPECT_EQ(capacity_factor_text(capacity_factor(std::pow(2, -2.5))), "0.1768");
  EXPECT_EQ(capacity_factor_text(capacity_factor(1.0 / 1024)), "0.0009766");
  EXPECT_EQ(capacity_factor_text(1024), "1024");
  EXPECT_EQ(capacity_factor_text(capacity_factor(12.3456)), "12.35");
  EXPECT_EQ(capacity_factor_text(capacity_factor(9.99996)), "10.00");
  for (double x = 1.0 / 2048; x < 4096; x *= 1.0137) {
    const double f = capacity_factor(x);
    EXPECT_EQ(std::stod(capacity_factor_text(f)), f) << x;
    EXPECT_LE(std::abs(f / x - 1), 5e-4) << x;
  }

  // A precision finer than the printed digits stops the bisection where no factor is left between
  // the two, instead of probing the same factor again until the run budget ends.
  CapacityOptions fine;
  fine.precision = 1e-9;
  const Capacity close = search_capacity(threshold_probe(3.3, &calls), default_slo(), fine);
  EXPECT_LT(close.probes.size(), fine.max_runs);
  EXPECT_EQ(close.factor, 3.3);
  EXPECT_EQ(close.failing_factor, 3.301);
}

TEST(WorkloadScaling, KeepsRequestsAndScalesTheRate) {
  Workload w;
  w.classes = {{"c", false}};
  w.requests = {{0, 0, 0.0, 10, 2}, {1, 0, 1.0, 20, 3}, {2, 0, 4.0, 30, 4}};
  EXPECT_NEAR(offered_rate(w), 2.0 / 4.0, 1e-12);  // two gaps in 4 s
  const Workload fast = with_rate_factor(w, 2.0);
  ASSERT_EQ(fast.requests.size(), 3u);
  EXPECT_NEAR(fast.requests[2].arrival, 2.0, 1e-12);
  EXPECT_EQ(fast.requests[1].prompt_tokens, 20u);
  EXPECT_EQ(fast.requests[2].id, 2u);
  EXPECT_NEAR(offered_rate(fast), 1.0, 1e-12);
  EXPECT_EQ(first_requests(w, 2).requests.size(), 2u);
  EXPECT_EQ(first_requests(w, 0).requests.size(), 3u);
  EXPECT_THROW(with_rate_factor(w, 0), Error);
}

// Real simulations: a cheap deployment (llama-3.1-8b on an H100, one engine) over the first 60
// requests of the small mixed workload.
TEST(CapacitySearch, SimulatedDeploymentHoldsAtCapacityAndFailsAboveIt) {
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const fs::path data = fs::path(HEADWAY_SOURCE_DIR) / "tests/integration/data";
  const DeploymentConfig deployment = load_deployment(data / "one_engine_rdns.toml", registry);
  const Workload workload = first_requests(load_workload(data / "small_mixed.toml"), 60);
  // The TTFT bound sits above the fixture's 16k-token documents' unloaded TTFT (32 chunks of 512
  // tokens at the calibrated 2.5 ms step overhead and up), so load, not the bound, decides.
  const Slo slo = parse_slo("ttft=1s,tpot=50ms");

  const Capacity c = find_capacity(deployment, workload, slo);
  ASSERT_GT(c.factor, 0) << "the SLO held at no factor";
  ASSERT_TRUE(std::isfinite(c.failing_factor)) << "the SLO never failed up to the largest factor";
  EXPECT_LE(c.failing_factor / c.factor, 1.05 + 1e-12);
  EXPECT_NEAR(c.requests_per_s, offered_rate(workload) * c.factor, 1e-9);
  EXPECT_EQ(c.requests, 60u);

  // The monotone property, checked on fresh simulations: within the SLO at the capacity, outside
  // it at the next factor the search tried.
  auto holds = [&](double factor) {
    return p99_against_slo(slo, simulate(deployment, with_rate_factor(workload, factor)).records)
        .holds;
  };
  EXPECT_TRUE(holds(c.factor));
  EXPECT_FALSE(holds(c.failing_factor));
  // The printed factor, parsed as --rate-scale parses it, runs the probe's workload: its p99 is
  // the probe's to the last bit.
  for (const CapacityProbe& p : c.probes) {
    const SloP99 again = p99_against_slo(
        slo,
        simulate(deployment, with_rate_factor(workload, std::stod(capacity_factor_text(p.factor))))
            .records);
    EXPECT_EQ(again.ttft, p.p99.ttft) << p.factor;
    EXPECT_EQ(again.tpot, p.p99.tpot) << p.factor;
  }

  // A workload whose requests arrive at one instant has no rate to scale: every probe would replay
  // the same burst. Refused, naming why, for one request and for many.
  for (const size_t n : {size_t{1}, size_t{5}}) {
    Workload burst = first_requests(workload, n);
    for (WorkloadRequest& r : burst.requests) r.arrival = 0.0;
    try {
      find_capacity(deployment, burst, slo);
      ADD_FAILURE() << n << " simultaneous requests should be refused";
    } catch (const Error& e) {
      const std::string why = e.what();
      EXPECT_NE(why.find(n == 1 ? "has 1 request," : "arrive at one instant"), std::string::npos)
          << why;
      EXPECT_NE(why.find("would replay the same load"), std::string::npos) << why;
    }
  }

  // Conversations that wait for answers bound their own load: a faster start of them is no more
  // load, and every probe would pass. Refused, naming the class.
  Workload waiting = workload;
  waiting.classes[0].turns = 2;
  waiting.classes[0].waits_for_answers = true;
  waiting.requests[1].class_index = 0;
  waiting.requests[1].turn = 1;
  waiting.requests[1].first_turn = waiting.requests[0].id;
  waiting.requests[0].class_index = 0;
  try {
    find_capacity(deployment, waiting, slo);
    ADD_FAILURE() << "a workload whose conversations wait for answers should be refused";
  } catch (const Error& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find("class '" + waiting.classes[0].name + "'"), std::string::npos) << why;
    EXPECT_NE(why.find("wait_for_answer"), std::string::npos) << why;
  }
  // Without a later turn among the requests searched (a --capacity-limit slice of first turns),
  // nothing waits: searchable.
  Workload firsts = waiting;
  firsts.requests[1].turn = 0;
  EXPECT_NO_THROW(check_capacity_searchable(firsts));
}

}  // namespace
}  // namespace headway::core
