// How much memory a run's request records take, so that a workload too large for the machine is
// refused before the run instead of ending minutes later in the kernel's OOM killer. A record
// keeps the emission time of every output token (for ITL and TPOT percentiles), so the size grows
// with the workload's output tokens, not only with its request count.
//
// Threading: pure functions.
#pragma once

#include <headway/core/workload.h>

#include <cstdint>

namespace headway::core {

// Bytes one run keeps for `workload`'s records until its report is built. Measured with `headway
// simulate` on the built-in deployment (peak RSS of 20,000 and 100,000 requests of
// configs/workloads/mixed_short_long.toml, about 13.6 KB per request at 203 output tokens each):
// 64 bytes per output token plus 1 KiB per request, which is 14.0 KB there.
uint64_t estimated_record_bytes(const Workload& workload);

// The output tokens of every request of `workload`.
uint64_t output_tokens(const Workload& workload);

// The memory this process may use at most, in bytes: the machine's physical memory, or the
// cgroup's limit (a container's --memory) when that is lower; 0 when neither says.
uint64_t memory_limit_bytes();

// Throws Error naming the workload, its size, the estimate and the limit when `needed_bytes` (the
// records of every run alive at once) exceed `available_bytes`. A limit of 0 checks nothing.
void check_record_memory(const Workload& workload, uint64_t needed_bytes, uint64_t available_bytes);

}  // namespace headway::core
