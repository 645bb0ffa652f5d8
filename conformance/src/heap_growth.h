// How much heap a plugin keeps between calls in steady state: bytes in use before and after a run
// of calls that should leave nothing behind (a scheduler re-planning one snapshot, a router placing
// requests). A plugin that leaks a little every step takes a server down after hours, and no rule
// the other tests check sees it.
//
// The figure is the whole process's heap, so the suite keeps its own allocations out of the
// measured loop. Under AddressSanitizer the sanitizer's allocator is asked; otherwise glibc's
// mallinfo2(). Threading: one thread (other threads' allocations would count too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headway::conformance {

// Bytes of heap in use now, or nullopt when this allocator does not say.
std::optional<uint64_t> heap_bytes_in_use();

// A growth of more than kHeapGrowthWarnBytes in total and kHeapGrowthWarnBytesPerCall per call on
// average is a QUALITY_WARNING: one-off growth (a vector reaching its size) stays under the first,
// a steady leak of even a small record per call crosses both over a few hundred calls.
inline constexpr uint64_t kHeapGrowthWarnBytes = 64 * 1024;
inline constexpr uint64_t kHeapGrowthWarnBytesPerCall = 64;

struct HeapGrowth {
  bool known = false;
  int64_t bytes = 0;  // after - before (negative: freed more than it took)
  uint64_t calls = 0;
  bool suspicious() const;
  std::string text(const char* what) const;  // "heap grew 12.8 MB over 200 schedule() calls"
};

}  // namespace headway::conformance
