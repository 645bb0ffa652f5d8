#include "headway/core/workload_scaling.h"

#include <fmt/format.h>

#include <cmath>

#include "headway/core/error.h"

namespace headway::core {

Workload with_rate_factor(const Workload& workload, double rate_factor) {
  if (!(rate_factor > 0) || !std::isfinite(rate_factor)) {
    throw Error(fmt::format("rate factor {} is not a finite positive number", rate_factor));
  }
  Workload out = workload;
  // Dividing (not multiplying by 1/f) keeps factor 1 exact; the order cannot change since every
  // arrival is divided by the same positive number.
  for (WorkloadRequest& r : out.requests) r.arrival /= rate_factor;
  return out;
}

Workload first_requests(const Workload& workload, size_t count) {
  if (count == 0 || count >= workload.requests.size()) return workload;
  Workload out;
  out.source = workload.source;
  out.seed = workload.seed;
  out.classes = workload.classes;
  out.warnings = workload.warnings;
  out.requests.assign(workload.requests.begin(),
                      workload.requests.begin() + static_cast<std::ptrdiff_t>(count));
  return out;
}

double offered_rate(const Workload& workload) {
  if (workload.requests.size() < 2) return 0;
  const double span = workload.requests.back().arrival - workload.requests.front().arrival;
  // n arrivals span n - 1 gaps: 101 requests 0.5 s apart offer 2 req/s, not 2.02.
  return span > 0 ? static_cast<double>(workload.requests.size() - 1) / span : 0;
}

}  // namespace headway::core
