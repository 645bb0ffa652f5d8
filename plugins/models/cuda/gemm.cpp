#include "gemm.h"

#include <algorithm>
#include <string>

#include "cuda_check.h"
#include "gemv.h"

namespace headway::models::cuda {
namespace {

void check_blas(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw sdk::Error(status == CUBLAS_STATUS_ALLOC_FAILED ? HW_RESOURCE_EXHAUSTED : HW_INTERNAL,
                   "cuda model: " + what + ": " + cublasLtGetStatusName(status) + ": " +
                       cublasLtGetStatusString(status));
}

std::string shape(uint32_t m, uint32_t n, uint32_t k) {
  return " (m=" + std::to_string(m) + ", n=" + std::to_string(n) + ", k=" + std::to_string(k) + ")";
}

}  // namespace

Gemm::Gemm(bool deterministic, bool small_m_gemv, uint32_t gemv_max_rows, size_t workspace_bytes)
    : deterministic_(deterministic),
      small_m_gemv_(small_m_gemv && !deterministic),
      gemv_max_rows_(std::min(gemv_max_rows, kernels::kGemvMaxRows)),
      workspace_(workspace_bytes) {
  check_blas(cublasLtCreate(&handle_), "cublasLtCreate");
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) destroy(p);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

Gemm::Plan Gemm::describe(uint32_t m, uint32_t n, uint32_t k, GemmOut out_type) {
  // Column-major view of the row-major product: D[n x m] = W^T[n x k] * X[k x m], with W stored
  // column-major as k x n (lda = k) and transposed by the operation.
  Plan p;
  const std::string where = shape(m, n, k);
  try {
    check_blas(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "cublasLtMatmulDescCreate" + where);
    const cublasOperation_t transa = CUBLAS_OP_T;
    const cublasOperation_t transb = CUBLAS_OP_N;
    check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                              sizeof(transa)),
               "cublasLtMatmulDescSetAttribute(TRANSA)" + where);
    check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                              sizeof(transb)),
               "cublasLtMatmulDescSetAttribute(TRANSB)" + where);
    const cudaDataType_t dtype = out_type == GemmOut::kF32 ? CUDA_R_32F : CUDA_R_16BF;
    check_blas(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, k),
               "cublasLtMatrixLayoutCreate(A)" + where);
    check_blas(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, m, k),
               "cublasLtMatrixLayoutCreate(B)" + where);
    check_blas(cublasLtMatrixLayoutCreate(&p.d, dtype, n, m, n),
               "cublasLtMatrixLayoutCreate(D)" + where);
  } catch (...) {
    destroy(p);
    throw;
  }
  return p;
}

void Gemm::destroy(Plan& p) {
  if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
  if (p.d != nullptr) cublasLtMatrixLayoutDestroy(p.d);
  if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

cublasStatus_t Gemm::best_algorithm(const Plan& p, cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulPreference_t pref = nullptr;
  cublasStatus_t status = cublasLtMatmulPreferenceCreate(&pref);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const uint64_t ws = workspace_.bytes();
  constexpr int kCandidates = 16;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                sizeof(ws));
  if (status == CUBLAS_STATUS_SUCCESS && deterministic_) {
    const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &mask, sizeof(mask));
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref,
                                            deterministic_ ? kCandidates : 1, results, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  // The heuristic ranks its results; take the best one the mode accepts.
  for (int i = 0; i < found; ++i) {
    if (!deterministic_) {
      algo = results[i].algo;
      return CUBLAS_STATUS_SUCCESS;
    }
    int32_t split_k = 1;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                             &split_k, sizeof(split_k),
                                             &written) == CUBLAS_STATUS_SUCCESS &&
        split_k <= 1) {
      algo = results[i].algo;
      return CUBLAS_STATUS_SUCCESS;
    }
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

bool Gemm::shared_algorithm(const Plan& p, uint32_t n, uint32_t k, GemmOut out_type,
                            cublasLtMatmulAlgo_t& algo) {
  const Key key{0, n, k, static_cast<int>(out_type)};
  auto it = shared_algorithms_.find(key);
  if (it == shared_algorithms_.end()) {
    Plan reference = describe(kReferenceRows, n, k, out_type);
    cublasLtMatmulAlgo_t chosen{};
    const cublasStatus_t status = best_algorithm(reference, chosen);
    destroy(reference);
    if (status != CUBLAS_STATUS_SUCCESS) return false;
    it = shared_algorithms_.emplace(key, chosen).first;
  }
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(handle_, p.desc, p.a, p.b, p.d, p.d, &it->second, &check) !=
          CUBLAS_STATUS_SUCCESS ||
      check.workspaceSize > workspace_.bytes()) {
    return false;
  }
  algo = it->second;
  return true;
}

const Gemm::Plan& Gemm::plan(uint32_t m, uint32_t n, uint32_t k, GemmOut out_type) {
  const Key key{m, n, k, static_cast<int>(out_type)};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p = describe(m, n, k, out_type);
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  // Deterministic: the algorithm of every other m when it applies here; else this m's own (still
  // without split-K; such an m may then differ in the last bits from the others).
  if (!deterministic_ || !shared_algorithm(p, n, k, out_type, p.algo)) {
    status = best_algorithm(p, p.algo);
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    destroy(p);
    check_blas(status, std::string("cublasLtMatmulAlgoGetHeuristic") +
                           (deterministic_ ? " (deterministic: no split-K)" : "") + shape(m, n, k));
  }
  return plans_.emplace(key, p).first->second;
}

void Gemm::run(const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, GemmOut out_type,
               uint32_t m, uint32_t n, uint32_t k, const kernels::Launch& on) {
  if (m == 0) return;
  if (takes_gemv(m, k, x, w, out)) {
    HW_CUDA_CHECK(kernels::gemv(x, w, out, out_type == GemmOut::kF32, m, n, k, on));
    return;
  }
  const Plan& p = plan(m, n, k, out_type);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const cublasStatus_t status =
      cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, out, p.d, out, p.d, &p.algo,
                     workspace_.data(), workspace_.bytes(), on.stream);
  if (status != CUBLAS_STATUS_SUCCESS) check_blas(status, "cublasLtMatmul" + shape(m, n, k));
}

}  // namespace headway::models::cuda
