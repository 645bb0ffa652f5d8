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
// 64 bytes per output token plus 512 per request, rounded up.
uint64_t estimated_record_bytes(const Workload& workload);

// Physical memory of this machine in bytes (0 when the system does not say).
uint64_t physical_memory_bytes();

// Throws Error naming the workload, its size, the estimate and the limit when `needed_bytes` (the
// records of every run alive at once) exceed `available_bytes`. A limit of 0 checks nothing.
void check_record_memory(const Workload& workload, uint64_t needed_bytes, uint64_t available_bytes);

}  // namespace headway::core
