#include "headway/core/capacity_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "headway/core/error.h"
#include "headway/core/report.h"
#include "headway/core/simulator.h"
#include "headway/core/workload_scaling.h"

namespace headway::core {

namespace {

void check_options(const CapacityOptions& o) {
  if (!(o.precision > 0))
    throw Error(fmt::format("capacity search: precision {} must be > 0", o.precision));
  // Within [1e-9, 1e9] the rounding to printed digits is exact (capacity_factor()); a load a
  // billion times lighter or heavier than the workload's is no question for a simulator.
  if (!(o.min_factor >= 1e-9) || !(o.min_factor <= o.start_factor) ||
      !(o.start_factor <= o.max_factor) || !(o.max_factor <= 1e9)) {
    throw Error(
        fmt::format("capacity search: need 1e-9 <= min_factor ({}) <= start_factor ({}) <= "
                    "max_factor ({}) <= 1e9",
                    o.min_factor, o.start_factor, o.max_factor));
  }
  if (o.max_runs == 0) throw Error("capacity search: max_runs must be >= 1");
}

// The power of ten of `factor`'s last significant digit, negated: 3 for 1.682, -1 for 12345.
int last_digit_exponent(double factor) {
  return kFactorDigits - 1 - static_cast<int>(std::floor(std::log10(factor)));
}

double power_of_ten(int exponent) {
  double p = 1;  // exact: every power of ten up to 1e22 is a double
  for (int i = 0; i < exponent; ++i) p *= 10;
  return p;
}

}  // namespace

double capacity_factor(double factor) {
  if (!(factor > 0) || !std::isfinite(factor)) return factor;
  const int exponent = last_digit_exponent(factor);
  // m / 10^k with both exact is the double nearest the decimal m * 10^-k, which is what parsing
  // its text gives.
  if (exponent >= 0) {
    const double scale = power_of_ten(exponent);
    return std::round(factor * scale) / scale;
  }
  const double scale = power_of_ten(-exponent);
  return std::round(factor / scale) * scale;
}

std::string capacity_factor_text(double factor) {
  if (!(factor > 0) || !std::isfinite(factor)) return fmt::format("{}", factor);
  return fmt::format("{:.{}f}", factor, std::max(0, last_digit_exponent(factor)));
}

Capacity search_capacity(const std::function<SloP99(double)>& probe, const Slo& slo,
                         const CapacityOptions& options) {
  check_options(options);
  Capacity out;
  out.slo = slo.text();
  constexpr double kInf = Capacity::kNoFailure;
  double held = 0, failed = kInf;  // invariant: the SLO held at `held` and failed at `failed`
  // Only factors the report prints in full (capacity_factor(): see the header).
  auto run = [&](double f) {
    CapacityProbe p{f, probe(f)};
    out.probes.push_back(p);
    if (p.p99.holds) {
      held = std::max(held, f);
    } else {
      failed = std::min(failed, f);
    }
    return p.p99.holds;
  };

  // Expansion: find a bracket [held, failed] one doubling wide.
  // Powers of two of the start, each rounded (rounding each step's rounded factor would drift).
  double unrounded = options.start_factor;
  double f = capacity_factor(unrounded);
  const bool first = run(f);
  while (out.probes.size() < options.max_runs) {
    unrounded = first ? unrounded * 2 : unrounded / 2;
    f = capacity_factor(unrounded);
    // The bounds hold the factors as asked, not as rounded (2^-9 rounds to 0.001953, under 1/512).
    if (unrounded > options.max_factor || unrounded < options.min_factor) break;
    if (run(f) != first) break;
  }
  // Bisection on the logarithm of the factor, since the question is "how many times faster".
  while (held > 0 && failed < kInf && failed / held > 1 + options.precision &&
         out.probes.size() < options.max_runs) {
    const double middle = capacity_factor(std::sqrt(held * failed));
    // A precision finer than the printed digits: no factor left between the two.
    if (!(middle > held && middle < failed)) break;
    run(middle);
  }
  out.factor = held;
  out.failing_factor = failed;
  return out;
}

void check_capacity_searchable(const Workload& workload) {
  for (const WorkloadRequest& r : workload.requests) {
    if (r.turn == 0 || r.class_index >= workload.classes.size() ||
        !workload.classes[r.class_index].waits_for_answers) {
      continue;
    }
    // Its turns go when answers come, not at a rate: raising the rate of conversation starts
    // packs them together, and the load stops growing at one turn in flight per conversation.
    throw Error(fmt::format(
        "capacity search: class '{}' of {} has conversations that wait for answers "
        "(conversation.wait_for_answer = true), whose load is bounded by how many conversations "
        "run at once, not by a rate the search could raise (every probe would pass at a rate no "
        "deployment serves); search with the open loop (wait_for_answer = false), or compare "
        "runs with more conversations (rate, count or duration)",
        workload.classes[r.class_index].name, workload.source));
  }
  if (offered_rate(workload) <= 0) {
    const size_t n = workload.requests.size();
    throw Error(fmt::format(
        "capacity search: it scales the arrival rate, but {}, so every probe would replay the same "
        "load; use arrivals spread over time (process = \"poisson\", fixed times that differ, or "
        "a trace){}",
        n < 2 ? fmt::format("{} has {} request{}", workload.source, n, n == 1 ? "" : "s")
              : fmt::format("the {} requests of {} arrive at one instant", n, workload.source),
        n < 2 ? "" : ", or simulate the burst itself without it"));
  }
}

Capacity find_capacity(const DeploymentConfig& deployment, const Workload& workload, const Slo& slo,
                       const CapacityOptions& options) {
  if (slo.empty()) throw Error("capacity search: the SLO names no term");
  check_capacity_searchable(workload);
  Capacity out = search_capacity(
      [&](double factor) {
        SimulationOptions run_options;
        run_options.run_label = fmt::format(" (capacity probe at {:g}x)", factor);
        run_options.warn_of_grown_queue = false;  // what the search looks for
        SimulationResult run =
            simulate(deployment, with_rate_factor(workload, factor), run_options);
        if (options.short_classes_only) {
          std::erase_if(run.records, [&](const RequestRecord& r) {
            return r.class_index < workload.classes.size() &&
                   workload.classes[r.class_index].is_long;
          });
        }
        return p99_against_slo(slo, run.records);
      },
      slo, options);
  out.base_rate = offered_rate(workload);
  out.requests = workload.requests.size();
  out.short_classes_only = options.short_classes_only;
  out.requests_per_s = out.base_rate * out.factor;
  return out;
}

nlohmann::json capacity_to_json(const Capacity& c) {
  nlohmann::json probes = nlohmann::json::array();
  for (const CapacityProbe& p : c.probes) {
    probes.push_back({{"factor", p.factor},
                      {"holds", p.p99.holds},
                      {"p99_ttft", number_or_null(p.p99.ttft)},
                      {"p99_tpot", number_or_null(p.p99.tpot)},
                      {"p99_e2e", number_or_null(p.p99.e2e)}});
  }
  return {
      {"slo", c.slo},
      {"criterion", c.short_classes_only
                        ? "p99 over the requests of the non-long classes; unfinished requests "
                          "count as infinitely late"
                        : "p99 over all requests; unfinished requests count as infinitely late"},
      {"factor", c.factor > 0 ? nlohmann::json(c.factor) : nlohmann::json(nullptr)},
      {"lower_bound", c.lower_bound()},
      {"failing_factor", number_or_null(c.failing_factor)},
      {"requests_per_s", c.requests_per_s},
      {"base_requests_per_s", c.base_rate},
      {"requests", c.requests},
      {"probes", std::move(probes)}};
}

}  // namespace headway::core
