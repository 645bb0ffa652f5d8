#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/record_memory.h>
#include <unistd.h>

namespace headway::core {
namespace {

constexpr uint64_t kBytesPerOutputToken = 64;
constexpr uint64_t kBytesPerRequest = 512;

double gigabytes(uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

}  // namespace

uint64_t estimated_record_bytes(const Workload& workload) {
  uint64_t bytes = 0;
  for (const WorkloadRequest& r : workload.requests) {
    bytes += kBytesPerRequest + kBytesPerOutputToken * r.output_tokens;
  }
  return bytes;
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

void check_record_memory(const Workload& workload, uint64_t needed_bytes,
                         uint64_t available_bytes) {
  if (available_bytes == 0 || needed_bytes <= available_bytes) return;
  uint64_t output_tokens = 0;
  for (const WorkloadRequest& r : workload.requests) output_tokens += r.output_tokens;
  throw Error(fmt::format(
      "workload {}: {} requests with {} output tokens need about {:.1f} GB to record every "
      "token's time in this run, and this machine has {:.1f} GB; simulate fewer requests "
      "(--num-requests, --duration, or a smaller count in the workload)",
      workload.source, workload.requests.size(), output_tokens, gigabytes(needed_bytes),
      gigabytes(available_bytes)));
}

}  // namespace headway::core
