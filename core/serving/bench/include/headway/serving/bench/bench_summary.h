// What a benchmark measures beyond the latency report (core/report.h): per class, how many
// requests failed and how (by FailureKind), how many streams came back with fewer tokens than
// asked for, the first failure message as an example; and how well the load generator kept its
// schedule (lateness of the sends) and how many sender threads it used.
//
// Pure functions; thread-safe.
#pragma once

#include <headway/core/report.h>
#include <headway/core/workload.h>

#include <array>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "headway/serving/bench/bench_runner.h"
#include "headway/serving/bench/stream_measurement.h"

namespace headway::serving::bench {

struct ClassOutcomes {
  std::string name;
  size_t sent = 0, succeeded = 0, failed = 0;
  std::array<size_t, kFailureKinds> failures_by_kind{};  // indexed by FailureKind
  size_t short_outputs = 0;   // succeeded with fewer tokens than max_tokens
  std::string first_failure;  // message of the first failed request in workload order
};

struct BenchSummary {
  std::vector<ClassOutcomes> classes;  // the workload's classes, in its order
  ClassOutcomes overall;               // name "overall"
  core::LatencySummary lateness;       // send time - scheduled arrival, over every request
  size_t sender_threads = 0, peak_in_flight = 0, max_concurrency = 0;
  double wall_seconds = 0;
};

BenchSummary summarize_bench(const core::Workload& workload, const BenchRun& run,
                             size_t max_concurrency);

// A table of outcomes per class (the failure kinds that occurred as columns), the first failure
// of each class that had one, then the lateness and thread figures.
void print_bench_summary(std::ostream& out, const BenchSummary& summary);

nlohmann::json bench_summary_to_json(const BenchSummary& summary);

}  // namespace headway::serving::bench
