#include "headway/serving/bench/workload_limits.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/workload_scaling.h>

namespace headway::serving::bench {

core::Workload limit_workload(const core::Workload& workload, size_t num_requests,
                              double duration_s, double rate_scale) {
  core::Workload limited =
      rate_scale == 1 ? workload : core::with_rate_factor(workload, rate_scale);
  if (duration_s > 0) {
    std::erase_if(limited.requests,
                  [&](const core::WorkloadRequest& r) { return r.arrival >= duration_s; });
    if (limited.requests.empty()) {
      throw core::Error(fmt::format("--duration {}: no request of {} arrives that early",
                                    duration_s, workload.source));
    }
  }
  if (num_requests > limited.requests.size()) {
    throw core::Error(fmt::format("--num-requests {}: {} has only {} requests{}", num_requests,
                                  workload.source, limited.requests.size(),
                                  duration_s > 0 ? " within --duration" : ""));
  }
  limited = core::first_requests(limited, num_requests);
  // Only a slower rate can take the arrivals past what the workload file was held to; the
  // requests kept are what counts (a few early ones of a slowed workload may still be timed).
  const double last = limited.requests.empty() ? 0.0 : limited.requests.back().arrival;
  if (!(last <= core::kMaxArrivalSeconds)) {
    throw core::Error(fmt::format(
        "--rate-scale {}: the requests of {} would arrive over {:.4g} s, beyond the 1e9 s a "
        "run can time (a larger --rate-scale, or fewer requests with --num-requests or "
        "--duration)",
        rate_scale, workload.source, last));
  }
  return limited;
}

}  // namespace headway::serving::bench
