// Matrix multiplies of the forward pass through cuBLASLt: out[m][n] = x[m][k] * w[n][k]^T, x and w
// BF16 row-major (w in the Hugging Face nn.Linear layout), FP32 accumulation, output BF16 or FP32.
//
// One workspace per instance; the algorithm chosen by cuBLASLt's heuristic is cached per shape
// (m, n, k, output type) together with its matrix descriptors, so a step whose shapes were seen
// before makes no heuristic query and no host allocation.
//
// Deterministic mode only accepts algorithms without split-K (no reduction across thread blocks),
// and uses one algorithm for every m of a given (n, k, output type): the one the heuristic picks
// for m = kReferenceRows, whenever cuBLASLt accepts it for the m at hand. The heuristic's own pick
// per m could be another kernel (a GEMV-like one for m = 1) that sums k in another order, so a
// row's result would depend on how many rows are multiplied with it. Same algorithm, no split-K:
// batch and chunking invariance, at the cost of parallelism for small m (decode).
//
// With `small_m_gemv` (the cuda model's `decode_gemv` option), products of at most
// `gemv_max_rows` rows (its `decode_gemv_max_rows`, kGemvRoutedRows by default) go to Headway's
// GEMV kernel (kernels/gemv.h) instead, where its alignment rules hold; ignored in deterministic
// mode.
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
#include "gemv.h"
#include "launch.h"

namespace headway::models::cuda {

// Rows up to which small_m_gemv takes the GEMV: on an H200 (Llama-3.1-8B's projections,
// docs/performance.md) it matched or beat cuBLASLt on every projection at m = 1 and 2; at m = 4 it
// won on q/k/v and o but lost more on gate/up and down; at m = 8 it lost on all.
inline constexpr uint32_t kGemvRoutedRows = 2;

enum class GemmOut { kBF16, kF32 };

class Gemm {
 public:
  explicit Gemm(bool deterministic = false, bool small_m_gemv = false,
                uint32_t gemv_max_rows = kGemvRoutedRows,
                size_t workspace_bytes = size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Throws sdk::Error naming cublasLtMatmul and the shape on failure (or when no algorithm fits).
  // on.overlap (kernels/launch.h) applies to the GEMV; cuBLASLt's kernels are launched as usual.
  void run(const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, GemmOut out_type, uint32_t m,
           uint32_t n, uint32_t k, const kernels::Launch& on);
  // Whether run() sends this product to the GEMV (small_m_gemv, m <= gemv_max_rows and the GEMV's
  // rules, kernels/gemv.h) rather than to cuBLASLt.
  bool takes_gemv(uint32_t m, uint32_t k, const void* x, const void* w, const void* out) const {
    return small_m_gemv_ && m <= gemv_max_rows_ && kernels::gemv_applies(m, k, x, w, out);
  }

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
  static constexpr uint32_t kReferenceRows = 128;
  const Plan& plan(uint32_t m, uint32_t n, uint32_t k, GemmOut out_type);
  // The descriptors of one shape (no algorithm yet); destroyed by destroy().
  static Plan describe(uint32_t m, uint32_t n, uint32_t k, GemmOut out_type);
  static void destroy(Plan& p);
  // The heuristic's best algorithm for `p` that the mode accepts; a cuBLAS status otherwise.
  cublasStatus_t best_algorithm(const Plan& p, cublasLtMatmulAlgo_t& algo);
  // Deterministic mode: whether the (n, k, output type) algorithm applies to `p` (set in algo).
  bool shared_algorithm(const Plan& p, uint32_t n, uint32_t k, GemmOut out_type,
                        cublasLtMatmulAlgo_t& algo);

  bool deterministic_;
  bool small_m_gemv_;
  uint32_t gemv_max_rows_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<std::byte> workspace_;
  std::map<Key, Plan> plans_;
  // Deterministic mode: the algorithm every m of an (n, k, output type) uses (key m = 0).
  std::map<Key, cublasLtMatmulAlgo_t> shared_algorithms_;
};

}  // namespace headway::models::cuda
