// Faulty on purpose: a tiny logits model that declares returns_prompt_logits (ABI 1.4) and, for a
// slice that asks for all its logits, writes its last position's row for every position (as a
// model that runs its LM head on the last token only and copies the result would). It writes the
// right number of rows, and each request's sampled row is right, so chunking and batching cannot
// see it. The suite must report model.prompt_logits as FAIL, and the model as not conformant.
#include <cmath>
#include <headway/plugin.hpp>

#include "tiny_logits_model.h"

namespace {

using headway::conformance::faulty::kTinyVocab;

class PromptRowsModel final : public headway::sdk::Model {
 public:
  PromptRowsModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {}
  hw_model_info info() const override {
    hw_model_info i = headway::conformance::faulty::tiny_logits_model_info();
    i.returns_prompt_logits = 1;
    return i;
  }
  void init_kv(uint32_t, uint32_t) override {}
  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      const uint32_t rows = headway::sdk::logits_rows(s);
      // The bug: every row is the last position's (a correct model uses position start + r).
      const float last = static_cast<float>(s.token_ids[s.tokens - 1]);
      const float position = static_cast<float>(s.start + s.tokens - 1);
      for (uint32_t r = 0; r < rows; ++r, ++row) {
        for (uint32_t v = 0; v < kTinyVocab; ++v) {
          out.logits[row * kTinyVocab + v] = std::sin(0.1f * last + 0.7f * v + 0.01f * position);
        }
      }
    }
    out.logits_rows = row;
    out.seconds = 1e-3;
  }
};

}  // namespace

HEADWAY_EXPORT_MODEL(PromptRowsModel, "org.headway.faulty.prompt_rows_model", "faulty_prompt_rows",
                     "0.0.1", "Faulty on purpose: every prompt row is the last position's",
                     headway::sdk::no_options)
