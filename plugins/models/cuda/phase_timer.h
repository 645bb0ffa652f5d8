// Where a step's GPU time goes, phase by phase (the cuda model's `phase_timing` option): CUDA
// events recorded on a shard's stream at every phase boundary of the forward pass; once the step
// has synchronised, the time between consecutive events is added to the phase that ended there,
// grouped by the step's token count (a decode batch, a prefill chunk). The phases tile the step,
// so their sum is the step's GPU time including any gap in which the GPU waited for the host.
//
// A diagnostic, off by default: each event costs a little host time (about 13 per layer), which
// can itself open such gaps; compare the sum with the untimed step time. The summary is logged
// when the model is destroyed.
//
// Ownership: owns its events. Threading: the thread driving the shard's stream.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace headway::models::cuda {

enum class Phase : int {
  kUpload,
  kEmbed,
  kAttentionNorm,
  kQkvGemm,
  kRopeKvWrite,
  kAttention,
  kOGemm,
  kAllReduce,
  kMlpNorm,
  kGateUpGemm,
  kSwiglu,
  kDownGemm,
  kHeadNorm,
  kLmHead,
  kSample,
  kCount
};

const char* phase_name(Phase phase);

class PhaseTimer {
 public:
  explicit PhaseTimer(bool enabled) : enabled_(enabled) {}
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  bool enabled() const { return enabled_; }
  // Starts a step of `tokens` tokens: records its first event on `stream`.
  void begin_step(uint32_t tokens, cudaStream_t stream);
  // `phase` ended here: records an event on `stream`. Inline, so that a disabled timer costs the
  // forward pass one branch per phase.
  void mark(Phase phase, cudaStream_t stream) {
    if (enabled_) record(phase, stream);
  }
  // After the step's stream has synchronised: adds each phase's time to its step size's totals.
  void end_step();
  // A step that failed: its events are dropped.
  void abandon_step() { marks_.clear(); }

  // "steps of 1 token (120 steps): qkv_gemm 0.712 ms, ... ; steps of 64 tokens ...", per step,
  // phases in forward-pass order; empty when nothing was timed.
  std::string summary() const;

 private:
  struct Totals {
    uint64_t steps = 0;
    std::array<double, static_cast<int>(Phase::kCount)> ms{};
  };
  cudaEvent_t event(size_t index);
  void record(Phase phase, cudaStream_t stream);

  bool enabled_;
  uint32_t step_tokens_ = 0;
  std::vector<cudaEvent_t> events_;  // reused step after step; events_[0] starts the step
  std::vector<Phase> marks_;         // marks_[i] ended at events_[i + 1]
  std::map<uint32_t, Totals> totals_;
};

}  // namespace headway::models::cuda
