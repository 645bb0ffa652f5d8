// A 64-byte aligned, uninitialised float/byte buffer that only ever grows: activations and KV
// memory are sized once (or grown rarely), never reallocated per step.
//
// Ownership: owns its memory. Threading: not synchronised; one owner.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <headway/sdk/status.hpp>
#include <string>

namespace headway::models::cpu {

template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count) { reserve(count); }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& other) noexcept : data_(other.data_), capacity_(other.capacity_) {
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Ensures room for `count` elements; contents are not preserved when it grows. Throws
  // sdk::Error(HW_RESOURCE_EXHAUSTED) when memory runs out.
  void reserve(size_t count) {
    if (count <= capacity_) return;
    std::free(data_);
    data_ = nullptr;
    capacity_ = 0;
    const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (data_ == nullptr) {
      throw sdk::Error(HW_RESOURCE_EXHAUSTED,
                       "cpu model: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    capacity_ = count;
  }
  void zero() {
    if (data_ != nullptr) std::memset(data_, 0, capacity_ * sizeof(T));
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return capacity_; }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace headway::models::cpu
