#include "headway/serving/bench/bench_summary.h"

#include <fmt/format.h>

#include <cmath>

namespace headway::serving::bench {

namespace {

void count(ClassOutcomes& c, const core::WorkloadRequest& request, const StreamResult& result) {
  // A turn never sent (an earlier turn of its conversation failed) fails without a send.
  if (result.failure != FailureKind::kEarlierTurnFailed) ++c.sent;
  if (result.ok()) {
    ++c.succeeded;
    if (result.output_tokens < request.output_tokens) ++c.short_outputs;
    return;
  }
  ++c.failed;
  ++c.failures_by_kind[static_cast<size_t>(result.failure)];
  if (c.first_failure.empty()) {
    c.first_failure =
        fmt::format("request {}: {}: {}", request.id, failure_name(result.failure), result.message);
  }
}

std::string milliseconds(double s) {
  return std::isfinite(s) ? fmt::format("{:.1f}ms", s * 1e3) : "-";
}

nlohmann::json outcomes_to_json(const ClassOutcomes& c) {
  nlohmann::json failures = nlohmann::json::object();
  for (size_t k = 1; k < kFailureKinds; ++k) {
    failures[std::string(failure_name(static_cast<FailureKind>(k)))] = c.failures_by_kind[k];
  }
  return {{"name", c.name},
          {"sent", c.sent},
          {"succeeded", c.succeeded},
          {"failed", c.failed},
          {"failures", std::move(failures)},
          {"short_outputs", c.short_outputs},
          {"first_failure",
           c.first_failure.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.first_failure)}};
}

nlohmann::json seconds_or_null(double s) {
  return std::isfinite(s) ? nlohmann::json(s) : nlohmann::json(nullptr);
}

}  // namespace

BenchSummary summarize_bench(const core::Workload& workload, const BenchRun& run,
                             size_t max_concurrency) {
  BenchSummary s;
  for (const core::RequestClass& c : workload.classes) {
    ClassOutcomes& outcomes = s.classes.emplace_back();
    outcomes.name = c.name;
  }
  s.overall.name = "overall";
  for (size_t i = 0; i < workload.requests.size() && i < run.results.size(); ++i) {
    const core::WorkloadRequest& request = workload.requests[i];
    count(s.classes.at(request.class_index), request, run.results[i]);
    count(s.overall, request, run.results[i]);
  }
  s.lateness = core::summarize(run.lateness);
  s.sender_threads = run.sender_threads;
  s.peak_in_flight = run.peak_in_flight;
  s.max_concurrency = max_concurrency;
  s.wall_seconds = run.wall_seconds;
  return s;
}

void print_bench_summary(std::ostream& out, const BenchSummary& s) {
  std::vector<size_t> kinds;  // only the failure kinds that occurred get a column
  for (size_t k = 1; k < kFailureKinds; ++k) {
    if (s.overall.failures_by_kind[k] > 0) kinds.push_back(k);
  }
  size_t width = std::string_view("overall").size();
  for (const ClassOutcomes& c : s.classes) width = std::max(width, c.name.size());
  width += 2;
  std::string header =
      fmt::format("{:<{}}{:>8}{:>11}{:>8}", "requests", width, "sent", "succeeded", "failed");
  for (size_t k : kinds) header += fmt::format("{:>14}", failure_name(static_cast<FailureKind>(k)));
  header += fmt::format("{:>15}", "short outputs");
  out << header << "\n";
  auto row = [&](const ClassOutcomes& c) {
    std::string line =
        fmt::format("{:<{}}{:>8}{:>11}{:>8}", c.name, width, c.sent, c.succeeded, c.failed);
    for (size_t k : kinds) line += fmt::format("{:>14}", c.failures_by_kind[k]);
    line += fmt::format("{:>15}", c.short_outputs);
    out << line << "\n";
  };
  for (const ClassOutcomes& c : s.classes) row(c);
  row(s.overall);
  for (const ClassOutcomes& c : s.classes) {
    if (!c.first_failure.empty())
      out << fmt::format("first failure of {}: {}\n", c.name, c.first_failure);
  }
  out << fmt::format(
      "send lateness (send time - scheduled arrival): p50 {}, p99 {}, max {}; {} sender threads, "
      "peak {} in flight (cap {}); {:.2f} s wall\n",
      milliseconds(s.lateness.p50), milliseconds(s.lateness.p99), milliseconds(s.lateness.max),
      s.sender_threads, s.peak_in_flight, s.max_concurrency, s.wall_seconds);
}

nlohmann::json bench_summary_to_json(const BenchSummary& s) {
  nlohmann::json classes = nlohmann::json::array();
  for (const ClassOutcomes& c : s.classes) classes.push_back(outcomes_to_json(c));
  return {{"classes", std::move(classes)},
          {"overall", outcomes_to_json(s.overall)},
          {"lateness",
           {{"p50", seconds_or_null(s.lateness.p50)},
            {"p99", seconds_or_null(s.lateness.p99)},
            {"max", seconds_or_null(s.lateness.max)}}},
          {"sender_threads", s.sender_threads},
          {"peak_in_flight", s.peak_in_flight},
          {"max_concurrency", s.max_concurrency},
          {"wall_seconds", s.wall_seconds}};
}

}  // namespace headway::serving::bench
