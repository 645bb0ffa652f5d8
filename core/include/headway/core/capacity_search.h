// Capacity: the highest request rate a deployment sustains within an SLO judged at p99 over all
// requests (slo.h). The load is varied by scaling the workload's arrivals (workload_scaling.h), so
// the same requests arrive f times faster at rate factor f; capacity is reported as that factor
// and as the offered rate at it ((requests - 1) / arrival span of the scaled workload, i.e. the
// workload's offered_rate() times f).
//
// Search: probe f = 1; while the SLO holds, double f (while it fails, halve it) until the outcome
// flips; then bisect geometrically between the highest factor that held and the lowest that
// failed until they are within `precision` of each other. Every factor probed is rounded to
// kFactorDigits significant digits (capacity_factor()), the digits the report prints, so that
// `--rate-scale` with a printed factor replays that probe exactly: near a deployment's capacity the
// p99 is not smooth in the factor (a factor 1e-4 off can turn a p99 TTFT of 1.9 s into 7.8 s), and
// a printed 1.682 that stood for 1.68179... ran another experiment. Every probe is a full
// simulation, and the simulator is deterministic, so the search is too. The result always
// satisfies: the SLO held at `factor` and failed at `failing_factor` (when both exist), with
// failing_factor / factor <= 1 + precision unless the run budget ran out first (or no printable
// factor lies between them).
//
// Threading: single-threaded; the caller owns everything it passes.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headway/core/deployment_config.h"
#include "headway/core/slo.h"
#include "headway/core/workload.h"

namespace headway::core {

struct CapacityOptions {
  double start_factor = 1.0;
  double precision = 0.05;  // stop when failing_factor / factor <= 1 + precision
  double min_factor = 1.0 / 1024;
  double max_factor = 1024;
  size_t max_runs = 24;  // simulations at most, expansion and bisection together
  // Judge only the non-long classes' requests (they still share the engines with the long ones).
  // The default judges every request, as the SLO says; with about 1% of prompts above 32k tokens,
  // the p99 TTFT of all requests is a long prefill's, which no load level brings under a few
  // seconds, so this is the way to ask what rate the short traffic sustains beside them.
  bool short_classes_only = false;
};

struct CapacityProbe {
  double factor = 0;
  SloP99 p99;
};

struct Capacity {
  std::string slo;                     // Slo::text()
  double factor = 0;                   // highest probed factor where the SLO held; 0 when none held
  double failing_factor = kNoFailure;  // lowest that failed above it
  double requests_per_s = 0;           // offered rate at `factor` (0 when none held)
  double base_rate = 0;                // offered rate of the unscaled workload
  size_t requests = 0;                 // requests per probe (after --capacity-limit)
  bool short_classes_only = false;     // as in the options it ran with
  std::vector<CapacityProbe> probes;   // in the order they ran

  // The SLO held at every factor probed (up to max_factor, or until the run budget ended): the
  // capacity is at least `factor`, not at it.
  bool lower_bound() const { return factor > 0 && !(failing_factor < kNoFailure); }
  static constexpr double kNoFailure = std::numeric_limits<double>::infinity();
};

// Significant digits of every factor the search probes and the report prints.
inline constexpr int kFactorDigits = 4;

// `factor` rounded to kFactorDigits significant digits: the double that parsing
// capacity_factor_text() of it gives back. Non-positive or non-finite factors pass unchanged.
double capacity_factor(double factor);

// `factor` in fixed notation with kFactorDigits significant digits ("1.682", "0.1768", "1024"):
// for a factor the search probed, exactly the factor it ran.
std::string capacity_factor_text(double factor);

// The search on any probe: `probe(f)` runs the workload at rate factor f and judges it. Throws
// Error for options that cannot work (precision <= 0, min_factor > start_factor, factors
// outside [1e-9, 1e9], ...).
Capacity search_capacity(const std::function<SloP99(double)>& probe, const Slo& slo,
                         const CapacityOptions& options = {});

// Throws Error when a capacity search over `workload` could not work: its load does not grow
// with its rate (conversations that wait for answers, RequestClass::waits_for_answers), or it has
// no rate to scale (fewer than two requests, or every arrival at one instant: scaling arrival
// times leaves such a workload as it is). Commands call it before their runs.
void check_capacity_searchable(const Workload& workload);

// The search on simulations of `deployment` over `workload` (already limited by the caller).
// Throws Error as check_capacity_searchable does.
Capacity find_capacity(const DeploymentConfig& deployment, const Workload& workload, const Slo& slo,
                       const CapacityOptions& options = {});

nlohmann::json capacity_to_json(const Capacity& capacity);

}  // namespace headway::core
