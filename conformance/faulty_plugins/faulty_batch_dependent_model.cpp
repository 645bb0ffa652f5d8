// Faulty on purpose: a tiny logits model whose output for a request depends on how many slices
// share its batch (as a kernel that normalises across the batch would). The suite must report
// model.batch_invariance as FAIL; chunked prefill alone is handled correctly.
#include <cmath>
#include <headway/plugin.hpp>

#include "tiny_logits_model.h"

namespace {

using headway::conformance::faulty::kTinyVocab;

class BatchDependentModel final : public headway::sdk::Model {
 public:
  BatchDependentModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {
  }
  hw_model_info info() const override {
    return headway::conformance::faulty::tiny_logits_model_info();
  }
  void init_kv(uint32_t, uint32_t) override {}
  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      if (!s.sample) continue;
      const float last = static_cast<float>(s.token_ids[s.tokens - 1]);
      const float position = static_cast<float>(s.start + s.tokens - 1);
      for (uint32_t v = 0; v < kTinyVocab; ++v) {
        // The bug: the batch size leaks into every logit.
        out.logits[row * kTinyVocab + v] =
            std::sin(0.1f * last + 0.7f * v + 0.01f * position) + 0.05f * batch.slice_count;
      }
      ++row;
    }
    out.seconds = 1e-3;
  }
};

}  // namespace

HEADWAY_EXPORT_MODEL(BatchDependentModel, "org.headway.faulty.batch_dependent_model",
                     "faulty_batch_dependent", "0.0.1",
                     "Faulty on purpose: logits depend on the batch", headway::sdk::no_options)
