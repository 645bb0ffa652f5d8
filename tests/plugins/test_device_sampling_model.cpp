// A wall-clock model that samples itself as the core's sampler does, written from
// headway/sdk/sampling.hpp the way a model sampling on its device would be: weights
// exp((logit - max) / T), the SDK's cuts, the SDK's draw in token order. It returns logits rows
// where the host asks (ABI 1.5), so that the conformance suite's model.device_sampling has a model
// that passes it (test_rows_on_request_model, which picks another token on purpose, fails it).
// Its rows spread their logits over about 6 nats, so that every filter cuts somewhere.
#include <algorithm>
#include <cmath>
#include <headway/plugin.hpp>
#include <headway/sdk/sampling.hpp>
#include <string>
#include <vector>

#include "toy_model_info.h"

namespace {

constexpr uint32_t kVocab = 96;

// The logits after `token` at `position`.
void row_after(int32_t token, uint32_t position, float* logits) {
  for (uint32_t v = 0; v < kVocab; ++v) {
    logits[v] = 3.0f * std::sin(0.37f * static_cast<float>(token) + 1.3f * static_cast<float>(v) +
                                0.11f * static_cast<float>(position));
  }
}

class DeviceSamplingModel final : public headway::sdk::Model {
 public:
  DeviceSamplingModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&)
      : weights_(kVocab), scratch_(kVocab) {}

  hw_model_info info() const override {
    hw_model_info i = headway::test::toy_model_info(kVocab);
    i.needs_token_ids = 1;
    i.returns_logits_on_request = 1;
    return i;
  }

  void init_kv(uint32_t, uint32_t) override {}

  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    const hw_model_info me = info();
    float logits[kVocab];
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      if (s.sample == 0) continue;
      const uint32_t last = s.tokens - 1;
      row_after(s.token_ids[last], s.start + last, logits);
      out.sampled[i] = sample(logits, s);
      if (headway::sdk::logits_rows(s, headway::sdk::sample_row_wanted(batch, i, me)) > 0) {
        std::copy(logits, logits + kVocab, out.logits + size_t{row} * kVocab);
        ++row;
      }
    }
  }

 private:
  // The core's sampling, written out from the SDK's pieces.
  int32_t sample(const float* logits, const hw_model_slice& s) {
    const int32_t best = static_cast<int32_t>(std::max_element(logits, logits + kVocab) - logits);
    if (s.temperature == 0.0f || s.top_k == 1) return best;
    for (uint32_t v = 0; v < kVocab; ++v) {
      weights_[v] = std::exp((logits[v] - logits[best]) / s.temperature);
    }
    const float cut = headway::sdk::sampling::keep_threshold(weights_.data(), kVocab, s.top_k,
                                                             s.top_p, s.min_p, scratch_.data());
    double total = 0.0;
    for (const float w : weights_) total += w >= cut ? w : 0.0f;
    const double target = headway::sdk::sampling::uniform(s.seed, s.output_index) * total;
    double cumulative = 0.0;
    int32_t last_kept = best;
    for (uint32_t v = 0; v < kVocab; ++v) {
      if (weights_[v] < cut || weights_[v] <= 0.0f) continue;
      last_kept = static_cast<int32_t>(v);
      cumulative += weights_[v];
      if (target < cumulative) return last_kept;
    }
    return last_kept;  // rounding put the target past the end
  }

  std::vector<float> weights_;
  std::vector<float> scratch_;
};

}  // namespace

HEADWAY_EXPORT_MODEL(DeviceSamplingModel, "org.headway.test.device_sampling_model",
                     "test_device_sampling_model", "0.0.1",
                     "Test: samples itself as the core does (headway/sdk/sampling.hpp)",
                     headway::sdk::no_options)
