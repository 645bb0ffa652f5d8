// How much heap a plugin keeps between calls in steady state: bytes in use before and after a run
// of calls that should leave nothing behind (a scheduler re-planning one snapshot, a router placing
// requests). A plugin that leaks a little every step takes a server down after hours, and no rule
// the other tests check sees it.
//
// The figure is the whole process's heap, so the suite keeps its own allocations out of the
// measured loop. Under AddressSanitizer or ThreadSanitizer the sanitizer's allocator is asked;
// otherwise glibc's mallinfo2(). Threading: one thread (other threads' allocations would count
// too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headway::conformance {

// Bytes of heap in use now, or nullopt when this allocator does not say.
std::optional<uint64_t> heap_bytes_in_use();

// When a growth of the heap over a number of units (calls, or requests that came and went) is a
// fault: more than `fail_bytes` in all and more than `fail_bytes_per_unit` per unit on average is a
// FAIL, more than the `warn_` pair a QUALITY_WARNING. Both halves must hold, so that one-off growth
// (a buffer reaching its size) stays under the total and a few bytes per unit of noise stay under
// the average.
struct HeapBounds {
  uint64_t warn_bytes;
  uint64_t warn_bytes_per_unit;
  uint64_t fail_bytes;
  uint64_t fail_bytes_per_unit;
};

// Per call, over the suite's 1,000 schedule() or 6,000 route() calls: a warning flags a plugin
// keeping about 64 bytes or more per call, and a leak of a few bytes per call is not seen. A
// failure is more than 1 MiB and 1 KiB per call: at a hundred steps a second such a plugin keeps
// 360 MB an hour, and a server is down within a day.
inline constexpr HeapBounds kPerCallHeapBounds{uint64_t{64} * 1024, 64, uint64_t{1024} * 1024,
                                               1024};

// Per request that came and went (scheduler.per_request_heap watches 16,000 leave the snapshots,
// router.per_request_heap 8,000 routed): memory kept per finished request grows without bound
// however it is sized, so the failing average is low (8 bytes, less than one id per request; at 100
// requests a second that is 70 MB a day) and the totals only keep allocator noise out.
inline constexpr HeapBounds kPerRequestHeapBounds{uint64_t{16} * 1024, 2, uint64_t{64} * 1024, 8};

struct HeapGrowth {
  bool known = false;
  int64_t bytes = 0;   // after - before (negative: freed more than it took)
  uint64_t units = 0;  // what the growth is averaged over (calls, requests)
  bool beyond(uint64_t total, uint64_t per_unit) const;
  // "heap grew 4096.0 KB over 1000 schedule() calls (4096 bytes per call)" for
  // text("schedule() calls", "call").
  std::string text(const char* units_phrase, const char* unit) const;
};

// Started before the calls to watch, stopped after them.
class HeapWatch {
 public:
  HeapWatch() : before_(heap_bytes_in_use()) {}
  HeapGrowth stop(uint64_t units) const;

 private:
  std::optional<uint64_t> before_;
};

class TestRecorder;

// The heap test's verdict on `growth`: SKIP where the allocator does not say, FAIL or
// QUALITY_WARNING beyond `bounds`, PASS with the figure otherwise. `units_phrase` and `unit` word
// the message, as HeapGrowth::text() takes them.
void judge_heap_growth(TestRecorder& test, const HeapGrowth& growth, const HeapBounds& bounds,
                       const char* units_phrase, const char* unit);

}  // namespace headway::conformance
