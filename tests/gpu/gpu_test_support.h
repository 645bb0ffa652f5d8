// Helpers of the GPU tests: the skip when no device is visible, device buffers filled from host
// vectors, BF16 conversions and tolerances. Threading: test-thread only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "half.h"

namespace headway::gpu_test {

// Empty when a device is usable; otherwise why not.
inline std::string no_device_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return std::string("no CUDA device visible (cudaGetDeviceCount: ") + cudaGetErrorName(err) +
           ")";
  }
  if (count == 0) return "no CUDA device visible (cudaGetDeviceCount: 0 devices)";
  return "";
}

// Skips the test without a device; fails it instead where HEADWAY_REQUIRE_GPU=1 (the device check
// sets it: there a GPU that the runtime cannot see is a failure, not a reason to pass by skipping).
inline bool gpu_required() {
  const char* v = std::getenv("HEADWAY_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

#define HW_SKIP_WITHOUT_CUDA()                                             \
  do {                                                                     \
    const std::string hw_reason = ::headway::gpu_test::no_device_reason(); \
    if (!hw_reason.empty() && ::headway::gpu_test::gpu_required()) {       \
      GTEST_FAIL() << hw_reason << " (HEADWAY_REQUIRE_GPU=1)";             \
    }                                                                      \
    if (!hw_reason.empty()) GTEST_SKIP() << hw_reason;                     \
  } while (0)

// A fresh directory under the system temp dir (a checkpoint's), removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("headway_cuda_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
  }
}

// A device copy of a host vector (or `count` uninitialised elements); freed at destruction.
template <class T>
class Dev {
 public:
  explicit Dev(size_t count) : count_(count) {
    check(cudaMalloc(&ptr_, std::max<size_t>(1, count) * sizeof(T)), "cudaMalloc");
  }
  explicit Dev(const std::vector<T>& host) : Dev(host.size()) { upload(host); }
  ~Dev() { cudaFree(ptr_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  void upload(const std::vector<T>& host) {
    check(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
          "cudaMemcpy H2D");
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
          "cudaMemcpy D2H");
    return host;
  }
  T* get() const { return static_cast<T*>(ptr_); }
  size_t size() const { return count_; }

 private:
  void* ptr_ = nullptr;
  size_t count_;
};

inline float bf(__nv_bfloat16 v) {
  uint16_t bits;
  std::memcpy(&bits, &v, 2);
  return models::cpu::bf16_to_f32(bits);
}
inline __nv_bfloat16 to_bf(float f) {
  const uint16_t bits = models::cpu::f32_to_bf16(f);
  __nv_bfloat16 v;
  std::memcpy(&v, &bits, 2);
  return v;
}
// Random BF16 values in [-scale, scale].
inline std::vector<__nv_bfloat16> random_bf16(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = to_bf(d(rng));
  return v;
}
inline std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// max |a - b| / max |b|.
inline double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace headway::gpu_test
