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

// A growth of more than kHeapGrowthWarnBytes in total and kHeapGrowthWarnBytesPerCall per call on
// average is a QUALITY_WARNING. Over the suite's 1,000 schedule() or 6,000 route() calls that
// flags a plugin keeping about 64 bytes or more per call; one-off growth (a buffer reaching its
// size) stays under the total, and a leak of a few bytes per call is not seen.
inline constexpr uint64_t kHeapGrowthWarnBytes = uint64_t{64} * 1024;
inline constexpr uint64_t kHeapGrowthWarnBytesPerCall = 64;
// A growth of more than 1 MiB and 1 KiB per call is a FAIL: at a hundred steps a second such a
// plugin keeps 360 MB an hour, and a server is down within a day.
inline constexpr uint64_t kHeapGrowthFailBytes = uint64_t{1024} * 1024;
inline constexpr uint64_t kHeapGrowthFailBytesPerCall = 1024;

struct HeapGrowth {
  bool known = false;
  int64_t bytes = 0;  // after - before (negative: freed more than it took)
  uint64_t calls = 0;
  bool suspicious() const;                   // beyond the warning bounds
  bool leaking() const;                      // beyond the failing bounds
  std::string text(const char* what) const;  // "heap grew 4096.0 KB over 1000 schedule() calls"
};

// Started before the calls to watch, stopped after them.
class HeapWatch {
 public:
  HeapWatch() : before_(heap_bytes_in_use()) {}
  HeapGrowth stop(uint64_t calls) const;

 private:
  std::optional<uint64_t> before_;
};

class TestRecorder;

// The steady-state heap test's verdict on `growth` of `what` ("schedule()") calls: SKIP where
// the allocator does not say, FAIL when leaking(), QUALITY_WARNING when suspicious(), PASS with the
// figure otherwise.
void judge_heap_growth(TestRecorder& test, const HeapGrowth& growth, const char* what);

}  // namespace headway::conformance
