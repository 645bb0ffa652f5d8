#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/record_memory.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace headway::core {
namespace {

constexpr uint64_t kBytesPerOutputToken = 64;
constexpr uint64_t kBytesPerRequest = 1024;

// A cgroup's memory limit: v2's memory.max ("max" when none), else v1's limit_in_bytes (a huge
// number when none). 0 when neither file says.
uint64_t cgroup_limit_bytes() {
  for (const char* file :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(file);
    std::string text;
    if (!(in >> text) || text == "max") continue;
    try {
      return std::stoull(text);
    } catch (const std::exception&) {
      continue;
    }
  }
  return 0;
}

double gigabytes(uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

}  // namespace

uint64_t output_tokens(const Workload& workload) {
  uint64_t tokens = 0;
  for (const WorkloadRequest& r : workload.requests) tokens += r.output_tokens;
  return tokens;
}

uint64_t estimated_record_bytes(const Workload& workload) {
  return kBytesPerRequest * workload.requests.size() +
         kBytesPerOutputToken * output_tokens(workload);
}

uint64_t memory_limit_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  const uint64_t physical = pages > 0 && page_size > 0
                                ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                                : 0;
  const uint64_t cgroup = cgroup_limit_bytes();
  if (physical == 0) return cgroup;
  return cgroup == 0 ? physical : std::min(physical, cgroup);
}

void check_record_memory(const Workload& workload, uint64_t needed_bytes,
                         uint64_t available_bytes) {
  if (available_bytes == 0 || needed_bytes <= available_bytes) return;
  throw Error(fmt::format(
      "workload {}: {} requests with {} output tokens need about {:.1f} GB to record every "
      "token's time in this run, and this process may use {:.1f} GB; simulate fewer requests "
      "(--num-requests, --duration, or a smaller count in the workload)",
      workload.source, workload.requests.size(), output_tokens(workload), gigabytes(needed_bytes),
      gigabytes(available_bytes)));
}

}  // namespace headway::core
