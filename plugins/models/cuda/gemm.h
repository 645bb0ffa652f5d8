// Matrix multiplies of the forward pass through cuBLASLt: out[m][n] = x[m][k] * w[n][k]^T, x and w
// BF16 row-major (w in the Hugging Face nn.Linear layout), FP32 accumulation, output BF16 or FP32.
//
// One workspace per instance; the algorithm chosen by cuBLASLt's heuristic is cached per shape
// (m, n, k, output type) together with its matrix descriptors, so a step whose shapes were seen
// before makes no heuristic query and no host allocation.
//
// Deterministic mode only accepts algorithms without split-K (no reduction across thread blocks),
// so that a row's result does not depend on how many rows are multiplied with it: batch and
// chunking invariance, at the cost of parallelism for small m (decode).
//
// Ownership: owns the cuBLASLt handle, the workspace and the plan cache; operands are borrowed for
// the call. Threading: one thread at a time (a model shard's); runs on the caller's stream and on
// the device current at construction.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "device_buffer.h"

namespace headway::models::cuda {

enum class GemmOut { kBF16, kF32 };

class Gemm {
 public:
  explicit Gemm(bool deterministic = false, size_t workspace_bytes = size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Throws sdk::Error naming cublasLtMatmul and the shape on failure (or when no algorithm fits).
  void run(const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, GemmOut out_type, uint32_t m,
           uint32_t n, uint32_t k, cudaStream_t stream);

  size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr;
    cublasLtMatrixLayout_t b = nullptr;
    cublasLtMatrixLayout_t d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<uint32_t, uint32_t, uint32_t, int>;
  const Plan& plan(uint32_t m, uint32_t n, uint32_t k, GemmOut out_type);

  bool deterministic_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<std::byte> workspace_;
  std::map<Key, Plan> plans_;
};

}  // namespace headway::models::cuda
