// A wall-clock model that returns logits but reads only the number of a request's tokens, never
// their ids (needs_token_ids = 0): the engine then holds no ids to count, so the service must
// refuse the penalties and bad words while it serves logit_bias, min_tokens and logprobs.
#include <headway/plugin.hpp>

#include "toy_model_info.h"

namespace {

constexpr uint32_t kVocab = 256;

class IdBlindModel final : public headway::sdk::Model {
 public:
  IdBlindModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {}

  hw_model_info info() const override {
    hw_model_info i = headway::test::toy_model_info(kVocab);
    i.needs_token_ids = 0;
    i.returns_logits = 1;
    return i;
  }

  void init_kv(uint32_t, uint32_t) override {}

  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      if (!s.sample) continue;
      // One clear favourite per position, so that greedy sampling is deterministic.
      const uint32_t favourite = static_cast<uint32_t>((s.request_id + s.output_index) % kVocab);
      float* logits = out.logits + static_cast<size_t>(row) * kVocab;
      for (uint32_t v = 0; v < kVocab; ++v) logits[v] = v == favourite ? 4.0f : 0.0f;
      ++row;
    }
  }
};

}  // namespace

HEADWAY_EXPORT_MODEL(IdBlindModel, "org.headway.test.id_blind_model", "test_id_blind_model",
                     "0.0.1", "Test: returns logits, reads no token ids", headway::sdk::no_options)
