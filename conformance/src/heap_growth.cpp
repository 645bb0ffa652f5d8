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

bool HeapGrowth::beyond(uint64_t total, uint64_t per_unit) const {
  return known && units > 0 && bytes > static_cast<int64_t>(total) &&
         static_cast<uint64_t>(bytes) > per_unit * units;
}

HeapGrowth HeapWatch::stop(uint64_t units) const {
  HeapGrowth growth;
  const std::optional<uint64_t> after = heap_bytes_in_use();
  if (!before_ || !after) return growth;
  growth.known = true;
  growth.bytes = static_cast<int64_t>(*after) - static_cast<int64_t>(*before_);
  growth.units = units;
  return growth;
}

namespace {

// "1 KiB" or "8 bytes".
std::string bytes_text(uint64_t bytes) {
  return bytes % 1024 == 0 ? fmt::format("{} KiB", bytes / 1024) : fmt::format("{} bytes", bytes);
}

}  // namespace

void judge_heap_growth(TestRecorder& test, const HeapGrowth& growth, const HeapBounds& bounds,
                       const char* units_phrase, const char* unit) {
  const std::string text = growth.text(units_phrase, unit);
  if (!growth.known) {
    test.skip(text);
    return;
  }
  test.metrics() = {{"heap_growth_bytes", growth.bytes}, {std::string(unit) + "s", growth.units}};
  if (growth.beyond(bounds.fail_bytes, bounds.fail_bytes_per_unit)) {
    test.fail(fmt::format("{}: a leak (more than {} kept per {})", text,
                          bytes_text(bounds.fail_bytes_per_unit), unit));
  } else if (growth.beyond(bounds.warn_bytes, bounds.warn_bytes_per_unit)) {
    test.warn(text + ": a leak?");
  } else {
    test.note(text);
  }
}

std::string HeapGrowth::text(const char* units_phrase, const char* unit) const {
  if (!known) return "this allocator does not report the heap in use";
  const double per_unit = units > 0 ? static_cast<double>(bytes) / static_cast<double>(units) : 0;
  return fmt::format("heap {} {:.1f} KB over {} {} ({:.0f} bytes per {})",
                     bytes >= 0 ? "grew" : "shrank", std::abs(static_cast<double>(bytes)) / 1e3,
                     units, units_phrase, per_unit, unit);
}

}  // namespace headway::conformance
