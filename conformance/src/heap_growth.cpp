#include "heap_growth.h"

#include <fmt/format.h>
#include <headway/conformance/test_recorder.h>
#include <malloc.h>

#include <cmath>

// Under ASan or TSan, malloc is the sanitizer's allocator: mallinfo2() would see none of it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// From the sanitizer runtime (sanitizer/allocator_interface.h, which GCC does not install).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace headway::conformance {

std::optional<uint64_t> heap_bytes_in_use() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return static_cast<uint64_t>(__sanitizer_get_current_allocated_bytes());
#elif defined(__GLIBC__)
  const struct mallinfo2 info = mallinfo2();
  // Small blocks in the arenas plus the large ones glibc maps on their own.
  return static_cast<uint64_t>(info.uordblks) + static_cast<uint64_t>(info.hblkhd);
#else
  return std::nullopt;
#endif
}

namespace {

bool grew_beyond(const HeapGrowth& g, uint64_t total, uint64_t per_call) {
  return g.known && g.calls > 0 && g.bytes > static_cast<int64_t>(total) &&
         static_cast<uint64_t>(g.bytes) > per_call * g.calls;
}

}  // namespace

bool HeapGrowth::suspicious() const {
  return grew_beyond(*this, kHeapGrowthWarnBytes, kHeapGrowthWarnBytesPerCall);
}

bool HeapGrowth::leaking() const {
  return grew_beyond(*this, kHeapGrowthFailBytes, kHeapGrowthFailBytesPerCall);
}

HeapGrowth HeapWatch::stop(uint64_t calls) const {
  HeapGrowth growth;
  const std::optional<uint64_t> after = heap_bytes_in_use();
  if (!before_ || !after) return growth;
  growth.known = true;
  growth.bytes = static_cast<int64_t>(*after) - static_cast<int64_t>(*before_);
  growth.calls = calls;
  return growth;
}

void judge_heap_growth(TestRecorder& test, const HeapGrowth& growth, const char* what) {
  if (!growth.known) {
    test.skip(growth.text(what));
    return;
  }
  test.metrics() = {{"heap_growth_bytes", growth.bytes}, {"calls", growth.calls}};
  if (growth.leaking()) {
    test.fail(growth.text(what) + ": a leak (more than 1 KiB kept per call)");
  } else if (growth.suspicious()) {
    test.warn(growth.text(what) + ": a leak?");
  } else {
    test.note(growth.text(what));
  }
}

std::string HeapGrowth::text(const char* what) const {
  if (!known) return "this allocator does not report the heap in use";
  const double per_call = calls > 0 ? static_cast<double>(bytes) / static_cast<double>(calls) : 0;
  return fmt::format("heap {} {:.1f} KB over {} {} calls ({:.0f} bytes per call)",
                     bytes >= 0 ? "grew" : "shrank", std::abs(static_cast<double>(bytes)) / 1e3,
                     calls, what, per_call);
}

}  // namespace headway::conformance
