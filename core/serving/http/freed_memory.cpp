#include "freed_memory.h"

#include <atomic>
#include <chrono>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace headway::serving::http {
namespace {

// A trim walks every arena under its lock (46 to 70 ms on a fragmented 600 MB heap, helper-134):
// one at a time, and at most one a second, so that a burst of large bodies neither piles trims up
// nor holds the arenas most of the time. A trim skipped is left pending for the frontend's
// housekeeping thread; any trim returns every arena's free pages, those freed since included.
constexpr std::chrono::nanoseconds kMinTrimInterval = std::chrono::seconds(1);
std::atomic<int64_t> next_trim_ns{0};
std::atomic<bool> trim_pending{false};

// Trims unless another thread does or did less than kMinTrimInterval ago.
bool trim_if_due() {
#if defined(__GLIBC__)
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  int64_t due = next_trim_ns.load(std::memory_order_relaxed);
  // Claiming the next slot is what makes a trim this thread's: a concurrent caller fails the
  // exchange, or finds the slot a second away.
  if (now < due || !next_trim_ns.compare_exchange_strong(due, now + kMinTrimInterval.count(),
                                                         std::memory_order_relaxed)) {
    return false;
  }
  trim_pending.store(false, std::memory_order_relaxed);
  malloc_trim(0);
  return true;
#else
  return false;
#endif
}

}  // namespace

bool return_freed_memory_after_body(size_t body_bytes) {
  if (body_bytes < kTrimAfterBodyBytes) return false;
  if (trim_if_due()) return true;
  trim_pending.store(true, std::memory_order_relaxed);
  return false;
}

bool return_freed_memory_if_pending() {
  return trim_pending.load(std::memory_order_relaxed) && trim_if_due();
}

}  // namespace headway::serving::http
