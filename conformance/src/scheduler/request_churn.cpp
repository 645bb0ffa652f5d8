#include "request_churn.h"

#include <fmt/format.h>
#include <headway/core/error.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "measured_scheduler.h"

namespace headway::conformance {

namespace {

constexpr uint32_t kRunning = 64;
constexpr uint32_t kWaiting = 64;
// Ids of the running and of the waiting requests, far apart so that the windows never meet.
constexpr uint64_t kRunningIds = 1;
constexpr uint64_t kWaitingIds = uint64_t{1} << 40;
constexpr double kSecondsPerCall = 0.004;

// Every field follows from the id, so that a request looks the same in each snapshot it is in.
hw_request_view running_request(uint64_t id) {
  const uint64_t n = id - kRunningIds;
  hw_request_view r{};
  r.id = id;
  r.state = HW_REQUEST_DECODING;
  r.prompt_tokens = 256 + static_cast<uint32_t>(n % 7) * 64;
  r.output_tokens = 1 + static_cast<uint32_t>(n % 50);
  r.total_tokens = r.prompt_tokens + r.output_tokens;
  r.computed_tokens = r.total_tokens - 1;
  r.max_output_tokens = 256;
  r.blocks_held =
      (r.computed_tokens + MeasuredScheduler::kBlockSize - 1) / MeasuredScheduler::kBlockSize;
  r.admission_order = n;
  r.arrival_time = kSecondsPerCall / kRequestTurnover * static_cast<double>(n);
  return r;
}

hw_request_view waiting_request(uint64_t id) {
  const uint64_t n = id - kWaitingIds;
  hw_request_view r{};
  r.id = id;
  r.state = HW_REQUEST_WAITING;
  r.prompt_tokens = r.total_tokens = 128 + static_cast<uint32_t>(n % 13) * 97;
  r.max_output_tokens = 128;
  r.arrival_time = kSecondsPerCall / kRequestTurnover * static_cast<double>(n);
  return r;
}

}  // namespace

RequestChurn measure_request_churn(const PluginUnderTest& p, uint32_t warm_up_calls,
                                   uint32_t calls) {
  RequestChurn churn;
  std::unique_ptr<MeasuredScheduler> scheduler;
  try {
    scheduler = std::make_unique<MeasuredScheduler>(p, kRunning, kWaiting);
  } catch (const core::Error& e) {
    churn.error = e.what();
    return churn;
  }
  churn.running = std::min(kRunning, scheduler->limits().max_num_seqs);
  churn.waiting = kWaiting;
  std::vector<hw_request_view> running(churn.running), waiting(churn.waiting);
  // Call c sees running ids first_running + c * turnover on, and likewise for the waiting ones:
  // each call, the oldest kRequestTurnover of each queue are gone (finished, aborted) for good.
  auto call = [&](uint64_t c, std::string* writes) {
    uint32_t blocks_used = 0;
    for (uint32_t j = 0; j < churn.running; ++j) {
      running[j] = running_request(kRunningIds + c * kRequestTurnover + j);
      blocks_used += running[j].blocks_held;
    }
    for (uint32_t j = 0; j < churn.waiting; ++j) {
      waiting[j] = waiting_request(kWaitingIds + c * kRequestTurnover + j);
    }
    scheduler->clock().advance(kSecondsPerCall);
    scheduler->plan(c, running, waiting, blocks_used, writes);
  };
  try {
    // Warm-up: the plugin's maps and buffers reach the size the live requests need.
    // Watched for writes into the snapshot too, as requests arrive and leave.
    for (uint64_t c = 0; c < warm_up_calls; ++c) {
      std::string writes;
      call(c, &writes);
      churn.checked_calls = static_cast<uint32_t>(c + 1);
      if (!writes.empty() && churn.snapshot_write.empty()) {
        churn.snapshot_write = fmt::format("step {}: {}", c, writes);
      }
    }
    const HeapWatch heap;
    for (uint64_t c = warm_up_calls; c < uint64_t{warm_up_calls} + calls; ++c) call(c, nullptr);
    // Both queues lost kRequestTurnover requests per call (when they were that long).
    churn.heap = heap.stop(uint64_t{calls} * (std::min(kRequestTurnover, churn.running) +
                                              std::min(kRequestTurnover, churn.waiting)));
    churn.calls = calls;
  } catch (const core::Error& e) {
    churn.error = e.what();
  }
  return churn;
}

}  // namespace headway::conformance
