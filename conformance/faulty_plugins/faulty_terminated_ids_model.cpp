// Faulty on purpose: a tiny model that samples itself and ends the ids it writes with a -1
// terminator, one entry past the batch's slices, in memory the host did not lend (abi.h: one id
// per slice). The suite's guard entry takes the write: it must fail the model, naming it.
#include <algorithm>
#include <cmath>
#include <headway/plugin.hpp>

#include "tiny_logits_model.h"

namespace {

using headway::conformance::faulty::kTinyVocab;

class TerminatedIdsModel final : public headway::sdk::Model {
 public:
  TerminatedIdsModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {}
  hw_model_info info() const override {
    hw_model_info i = headway::conformance::faulty::tiny_logits_model_info();
    i.returns_logits = 0;
    return i;
  }
  void init_kv(uint32_t, uint32_t) override {}
  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      if (s.sample == 0) continue;
      // Greedy over the tiny logits of the last token and its position.
      const float last = static_cast<float>(s.token_ids[s.tokens - 1]);
      const float position = static_cast<float>(s.start + s.tokens - 1);
      float best = -2.0f;
      for (uint32_t v = 0; v < kTinyVocab; ++v) {
        const float value = std::sin(0.1f * last + 0.7f * v + 0.01f * position);
        if (value > best) {
          best = value;
          out.sampled[i] = static_cast<int32_t>(v);
        }
      }
    }
    out.sampled[batch.slice_count] = -1;  // the fault: a terminator past the last slice's id
    out.seconds = 1e-3;
  }
};

}  // namespace

HEADWAY_EXPORT_MODEL(TerminatedIdsModel, "org.headway.faulty.terminated_ids_model",
                     "faulty_terminated_ids", "0.0.1",
                     "Faulty on purpose: writes a terminator past its sampled ids",
                     headway::sdk::no_options)
