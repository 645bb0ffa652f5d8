// Owning RAII wrappers for device and pinned host memory. Errors become sdk::Error through
// check_cuda (out of memory: HW_RESOURCE_EXHAUSTED).
//
// Ownership: a buffer owns its allocation; moving transfers it. The buffer allocates on the device
// current when reserve() is called and must be destroyed with a context for it alive (the model's
// shards free their buffers before they release their streams and devices).
// Threading: not synchronised; one owner at a time.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda_check.h"

namespace headway::models::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { reserve(count); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Makes room for `count` elements; contents are not kept when it grows.
  void reserve(size_t count) {
    if (count <= count_) return;
    release();
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
    data_ = static_cast<T*>(p);
    count_ = count;
  }
  T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void release() noexcept {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  size_t count_ = 0;
};

template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void reserve(size_t count) {
    if (count <= count_) return;
    release();
    void* p = nullptr;
    check_cuda(cudaMallocHost(&p, count * sizeof(T)), "cudaMallocHost");
    data_ = static_cast<T*>(p);
    count_ = count;
  }
  T* data() const { return data_; }
  size_t size() const { return count_; }

 private:
  void release() noexcept {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace headway::models::cuda
