// Deployments compared over one workload drawn with several seeds (`headway simulate --seeds N`).
//
// One seed's comparison can mislead: when the long prompts arrive decides how often short ones
// queue behind them (docs/performance.md, "Over eight draws of the workload", has the documented
// 70B comparison's spread). The sweep therefore reports, per deployment, each figure's median and
// range over the seeds, and, seed by seed against the first deployment (the baseline), the median
// ratio and in how many seeds the deployment did better.
//
// Figures: short p99 TTFT, long p99 TTFT, short p99 ITL, HOL and stall factors, output tokens/s,
// goodput requests/s and preemptions, as in comparison_table.h. A figure missing in a seed (no
// long request drawn, no SLO given) is left out of that figure's spread, and the spread says over
// how many seeds it was taken. "Better" is lower for latencies and higher for goodput; a tie is
// neither.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "headway/core/comparison_table.h"

namespace headway::core {

// One figure over the seeds that have it (NaN and seeds 0 when none has).
struct SeedSpread {
  double median = LatencySummary::kNaN, min = LatencySummary::kNaN, max = LatencySummary::kNaN;
  size_t seeds = 0;
};

// This deployment against the baseline, seed by seed.
struct SeedRatio {
  SeedSpread ratio;     // of this / baseline, over the seeds where the baseline's figure is > 0
  size_t better = 0;    // seeds in which it did better than the baseline by more than 1%
  size_t compared = 0;  // seeds in which both have the figure (a baseline goodput of 0 included)
};

struct SeedSweepRow {
  std::string deployment;
  SeedSpread short_ttft_p99, long_ttft_p99, short_itl_p99, hol_factor, stall_factor,
      output_tokens_per_s, goodput_requests_per_s, preemptions;
  // Versus the first row; every spread empty for the first row itself.
  SeedRatio short_ttft_p99_vs, long_ttft_p99_vs, short_itl_p99_vs, goodput_vs;
};

struct SeedSweep {
  std::string workload;  // what was drawn, for the table's title; set by the caller
  std::vector<uint64_t> seeds;
  std::string slo;  // as Comparison::slo
  std::vector<SeedSweepRow> rows;
};

// `per_seed[i]` is the comparison of the workload drawn with `seeds[i]`; every one must list the
// same deployments in the same order (the first is the baseline). Throws Error (HW_INTERNAL)
// when the sizes or the deployments differ.
SeedSweep summarize_seeds(const std::vector<uint64_t>& seeds,
                          const std::vector<Comparison>& per_seed);

// Two tables: each deployment's median and min-max per figure, then (with >= 2 deployments) the
// median ratio to the baseline and the seeds in which it was better; then a legend line. Not
// thread-safe with respect to `out`.
void print_seed_sweep(std::ostream& out, const SeedSweep& sweep);

nlohmann::json seed_sweep_to_json(const SeedSweep& sweep);

}  // namespace headway::core
