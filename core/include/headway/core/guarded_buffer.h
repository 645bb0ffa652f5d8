// GuardedBuffer: an array the host lends a plugin to fill (a plan's slices, a batch's sampled ids),
// with one guard entry past the capacity it declares. abi.h says a plugin writes no entry past a
// capacity; a hand-written C plugin off by one would otherwise write into the host's heap, where a
// release build corrupts memory without a word. Writing into the guard changes its bytes, which
// the host checks after the call and reports naming the plugin.
//
// Catches the off-by-one write (the entry at the capacity), not a write further on. Grows only
// when a capacity is larger than any before, so the step loop does not allocate in steady state.
// Header-only. Ownership: owns its entries. Threading: one thread (the engine's).
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

namespace headway::core {

template <class T>
class GuardedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "the guard is compared byte by byte");

 public:
  GuardedBuffer() { prepare(0); }
  // Room for `capacity` entries and the guard after them; returns the entries. The guard is set
  // anew for this capacity.
  T* prepare(size_t capacity) {
    if (entries_.size() < capacity + 1) entries_.resize(capacity + 1);
    capacity_ = capacity;
    std::memset(static_cast<void*>(&entries_[capacity]), kGuardByte, sizeof(T));
    return entries_.data();
  }
  // False when something wrote the entry at the capacity of the last prepare().
  bool guard_intact() const {
    const auto* guard = reinterpret_cast<const unsigned char*>(&entries_[capacity_]);
    for (size_t i = 0; i < sizeof(T); ++i) {
      if (guard[i] != kGuardByte) return false;
    }
    return true;
  }
  size_t capacity() const { return capacity_; }
  T* data() { return entries_.data(); }
  T& operator[](size_t i) { return entries_[i]; }
  const T& operator[](size_t i) const { return entries_[i]; }

 private:
  // A byte no field a plugin fills is likely to end up as in every position: 0 and 0xFF are
  // what cleared or -1 fields hold.
  static constexpr unsigned char kGuardByte = 0xA5;
  std::vector<T> entries_;
  size_t capacity_ = 0;
};

}  // namespace headway::core
