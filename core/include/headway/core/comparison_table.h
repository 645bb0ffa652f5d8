// The comparison of several deployments over one workload (`headway simulate --config a --config
// b ...`): one row per deployment with the figures that decide between head-of-line remedies, and
// the same figures relative to the first deployment, which is the baseline.
//
// Columns (times in seconds; "short" = the non-long classes pooled, "long" = the long classes
// pooled, as Report::short_group / long_group):
//   short and long TTFT p50/p99, short ITL p99, HOL and stall factors (report.h), output
//   throughput (tokens/s), goodput (requests/s meeting every term of the SLO per request, slo.h),
//   preemptions (requests sent back to the queue for KV room, counted each time), KV transfer
//   p50/p99 and KV wait p99 (report.h) over moved requests (shown when any deployment moved KV).
// Relative figures, vs the first row: output throughput change (this / baseline - 1), and the
// ratios this / baseline of goodput, short and long p99 TTFT, short p99 ITL.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "headway/core/report.h"

namespace headway::core {

struct NamedReport {
  std::string deployment;
  const Report* report = nullptr;  // borrowed for the call
};

struct ComparisonRow {
  std::string deployment;
  double short_ttft_p50 = LatencySummary::kNaN, short_ttft_p99 = LatencySummary::kNaN;
  double long_ttft_p50 = LatencySummary::kNaN, long_ttft_p99 = LatencySummary::kNaN;
  double short_itl_p99 = LatencySummary::kNaN;
  std::optional<double> hol_factor, stall_factor;
  double output_tokens_per_s = 0;
  std::optional<double> goodput_requests_per_s;  // absent when the report has no goodput
  uint64_t preemptions = 0;
  size_t kv_transfers = 0;
  double kv_transfer_p50 = LatencySummary::kNaN, kv_transfer_p99 = LatencySummary::kNaN;
  // The same requests' waits before their transfer could start (room on the decode engine, and the
  // end of its step): what moved_kv_blocks = "all" costs.
  double kv_wait_p99 = LatencySummary::kNaN;

  // Versus the first row (absent for it, and wherever either side is missing or zero).
  std::optional<double> throughput_change;  // this / baseline - 1
  std::optional<double> goodput_ratio, short_ttft_p99_ratio, long_ttft_p99_ratio,
      short_itl_p99_ratio;
};

struct Comparison {
  std::string slo;  // the goodput SLO text, empty when no report had goodput
  std::vector<ComparisonRow> rows;
};

// Rows in the order given; the first is the baseline. Throws Error for a null report.
Comparison compare_reports(const std::vector<NamedReport>& reports);

// The table, then the "vs <baseline>" table (when there are >= 2 rows), then a legend line.
void print_comparison(std::ostream& out, const Comparison& comparison);

nlohmann::json comparison_to_json(const Comparison& comparison);

}  // namespace headway::core
