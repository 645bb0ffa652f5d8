// The latency report of a `headway simulate` / `headway bench` run: per-class and overall TTFT,
// ITL, TPOT, E2E and queue-time distributions, throughput, and the head-of-line (HOL) and stall
// factors against a baseline run without the long classes.
//
// Definitions (all times in seconds, on the run's clock):
//   TTFT  = first_token - arrival, per finished request.
//   ITL   = every gap between consecutive token_times of a finished request, pooled per class.
//   TPOT  = (time of the last token - first_token) / (output_tokens - 1), per finished request
//           with output_tokens >= 2 (the last token's time is token_times.back(), or finish when
//           token_times is empty).
//   E2E   = finish - arrival; queue = scheduled - arrival.
//   KV transfer = RequestRecord::kv_transfer_seconds of the finished requests whose KV moved
//           between engines (> 0; disaggregated deployments only); count 0 elsewhere.
//   Percentiles interpolate linearly (see percentiles.h).
//   Throughput: output tokens generated (by every record, finished or not) / span_seconds, where
//           span_seconds runs from the first arrival to the last finish or token of any record.
//           Per-class throughputs share that denominator, so they add up to the overall one.
//   requests: the workload's requests of the class (or its records, if there are more);
//           finished: records with finished == true. Unfinished ones are excluded from latencies.
//   HOL factor: p99 TTFT of the non-long classes together in this run / the same in the baseline
//           run (`without_long`); stall factor: the same ratio of p99 ITL. Absent without a
//           baseline, without a long class, or when either p99 is missing or zero.
//   short / long groups: the non-long classes pooled, and the long classes pooled (named
//           "short" and "long"), for comparisons that must not depend on class names.
//   goodput: requests meeting an SLO per second of span (slo.h); set by the caller with
//           add_goodput(), absent otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "headway/core/request_record.h"
#include "headway/core/slo.h"
#include "headway/core/workload.h"

namespace headway::core {

struct LatencySummary {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  size_t count = 0;
  double p50 = kNaN, p90 = kNaN, p99 = kNaN, max = kNaN, mean = kNaN;  // NaN when count == 0
};

// Summary of `values` (NaNs are dropped first). Pure; thread-safe.
LatencySummary summarize(std::vector<double> values);

struct ClassReport {
  std::string name;
  bool is_long = false;
  size_t requests = 0, finished = 0;
  LatencySummary ttft, itl, tpot, e2e, queue;
  LatencySummary kv_transfer;  // moved requests only; count 0 when nothing moved
  double output_tokens_per_s = 0, requests_per_s = 0;  // requests_per_s counts finished requests
  uint64_t output_tokens = 0;                          // generated, finished or not
};

// Per-step figures of a run (all engines pooled).
struct StepSummary {
  size_t steps = 0;
  LatencySummary duration;         // seconds per step
  double mean_batch_size = 0;      // slices per step
  double mean_prefill_tokens = 0;  // per step
  double mean_decode_tokens = 0;   // per step
  double peak_kv_fraction = 0;     // highest KV blocks used / total, over engines and steps
};

// Pure; thread-safe. kv_blocks_total[e] is engine e's pool size.
StepSummary summarize_steps(const std::vector<StepRecord>& steps,
                            const std::vector<uint32_t>& kv_blocks_total);

struct Report {
  std::vector<ClassReport> classes;  // one per workload class, in the workload's order
  ClassReport overall;               // every class pooled; name "overall"
  ClassReport short_group;           // the non-long classes pooled; name "short"
  ClassReport long_group;            // the long classes pooled; name "long" (empty without one)
  double simulated_seconds = 0, wall_seconds = 0;  // span of the run on its clock, and real time
  double span_seconds = 0;  // first arrival to last finish/token over the records (throughput)
  std::optional<double> hol_factor;    // p99 TTFT of non-long classes: with long / without long
  std::optional<double> stall_factor;  // same ratio for p99 ITL
  std::optional<double> short_p99_ttft_without_long;
  std::optional<double> short_p99_ttft;  // non-long classes in this run (with the long ones)
  std::optional<double> short_p99_itl;
  std::optional<double> short_p99_itl_without_long;
  uint64_t preemptions = 0;  // sum over records
  size_t steps = 0;
  std::optional<StepSummary> step_summary;  // when the caller recorded steps
  std::optional<Goodput> goodput;           // when the caller judged the run against an SLO
  // A run measured against a server (`headway bench`) rather than simulated: it has no simulated
  // time, and print_report says so instead of printing one.
  bool measured = false;
};

// Builds the report of one run. `records` are matched to classes by RequestRecord::class_index;
// a record whose class_index is out of range throws headway::core::Error. `without_long`, when
// given, holds the records of the baseline run of workload.without_long_classes(). Borrowed
// inputs are only read during the call. Pure; thread-safe.
Report build_report(const Workload& workload, const std::vector<RequestRecord>& records,
                    size_t steps, double simulated_seconds, double wall_seconds,
                    const std::vector<RequestRecord>* without_long = nullptr);

// Sets report.goodput for `slo` over the same records the report was built from. Pure.
void add_goodput(Report& report, const Slo& slo, const std::vector<RequestRecord>& records);

// Human-readable tables: a summary row per class + overall (requests, finished, throughput), then
// one table per metric (TTFT, ITL, TPOT, E2E, queue, and KV transfer when anything moved:
// p50/p90/p99/max/mean with units), then the HOL and stall factors, goodput and the times. Not
// thread-safe with respect to `out`.
void print_report(std::ostream& out, const Report& report);

// The same figures, machine-readable; times in seconds, missing values as null.
nlohmann::json report_to_json(const Report& report);

}  // namespace headway::core
