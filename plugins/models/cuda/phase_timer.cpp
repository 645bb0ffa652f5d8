#include "phase_timer.h"

#include <cstdio>

#include "cuda_check.h"

namespace headway::models::cuda {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kUpload:
      return "upload";
    case Phase::kEmbed:
      return "embed";
    case Phase::kAttentionNorm:
      return "attention_norm";
    case Phase::kQkvGemm:
      return "qkv_gemm";
    case Phase::kRopeKvWrite:
      return "rope_kv_write";
    case Phase::kAttention:
      return "attention";
    case Phase::kOGemm:
      return "o_gemm";
    case Phase::kAllReduce:
      return "all_reduce";
    case Phase::kMlpNorm:
      return "mlp_norm";
    case Phase::kGateUpGemm:
      return "gate_up_gemm";
    case Phase::kSwiglu:
      return "swiglu";
    case Phase::kDownGemm:
      return "down_gemm";
    case Phase::kHeadNorm:
      return "head_norm";
    case Phase::kLmHead:
      return "lm_head";
    case Phase::kSample:
      return "sample";
    case Phase::kCount:
      break;
  }
  return "?";
}

PhaseTimer::~PhaseTimer() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t PhaseTimer::event(size_t index) {
  while (events_.size() <= index) {
    cudaEvent_t e = nullptr;
    HW_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  return events_[index];
}

void PhaseTimer::begin_step(uint32_t tokens, cudaStream_t stream) {
  if (!enabled_) return;
  marks_.clear();
  step_tokens_ = tokens;
  HW_CUDA_CHECK(cudaEventRecord(event(0), stream));
}

void PhaseTimer::record(Phase phase, cudaStream_t stream) {
  HW_CUDA_CHECK(cudaEventRecord(event(marks_.size() + 1), stream));
  marks_.push_back(phase);
}

void PhaseTimer::end_step() {
  if (!enabled_ || marks_.empty()) return;
  Totals& totals = totals_[step_tokens_];
  ++totals.steps;
  for (size_t i = 0; i < marks_.size(); ++i) {
    float ms = 0.0f;
    HW_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
    totals.ms[static_cast<int>(marks_[i])] += ms;
  }
  marks_.clear();
}

std::string PhaseTimer::summary() const {
  std::string out;
  for (const auto& [tokens, totals] : totals_) {
    double step_ms = 0.0;
    for (double ms : totals.ms) step_ms += ms;
    const double steps = static_cast<double>(totals.steps);
    char head[96];
    std::snprintf(head, sizeof head,
                  "%ssteps of %u tokens (%llu steps, %.3f ms per step):", out.empty() ? "" : "; ",
                  tokens, static_cast<unsigned long long>(totals.steps), step_ms / steps);
    out += head;
    for (int p = 0; p < static_cast<int>(Phase::kCount); ++p) {
      if (totals.ms[p] == 0.0) continue;
      char item[64];
      std::snprintf(item, sizeof item, " %s %.4f", phase_name(static_cast<Phase>(p)),
                    totals.ms[p] / steps);
      out += item;
    }
  }
  return out;
}

}  // namespace headway::models::cuda
