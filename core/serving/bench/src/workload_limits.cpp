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
  return core::first_requests(limited, num_requests);
}

}  // namespace headway::serving::bench
