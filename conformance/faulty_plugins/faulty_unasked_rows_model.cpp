// Faulty on purpose: a tiny model that samples itself and declares returns_logits_on_request
// (ABI 1.5), but writes the logits row of every sampling slice, asked for or not (as a model that
// ignores hw_model_batch.logits_wanted would). When the host asks for every row, as the other
// tests do, nothing is wrong; when it leaves one out, the rows after it land in the wrong places
// and the last one past the host's buffer. The suite must report model.logits_on_request as FAIL.
#include <algorithm>
#include <cmath>
#include <headway/plugin.hpp>

#include "tiny_logits_model.h"

namespace {

using headway::conformance::faulty::kTinyVocab;

class UnaskedRowsModel final : public headway::sdk::Model {
 public:
  UnaskedRowsModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {}
  hw_model_info info() const override {
    hw_model_info i = headway::conformance::faulty::tiny_logits_model_info();
    i.returns_logits = 0;
    i.returns_logits_on_request = 1;
    return i;
  }
  void init_kv(uint32_t, uint32_t) override {}
  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    float row_values[kTinyVocab];
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      if (s.sample == 0) continue;
      const float last = static_cast<float>(s.token_ids[s.tokens - 1]);
      const float position = static_cast<float>(s.start + s.tokens - 1);
      for (uint32_t v = 0; v < kTinyVocab; ++v) {
        row_values[v] = std::sin(0.1f * last + 0.7f * v + 0.01f * position);
      }
      out.sampled[i] =
          static_cast<int32_t>(std::max_element(row_values, row_values + kTinyVocab) - row_values);
      // The bug: the row is written whether or not logits_wanted asks for it.
      if (out.logits != nullptr) {
        std::copy(row_values, row_values + kTinyVocab, out.logits + size_t{row} * kTinyVocab);
      }
      ++row;
    }
    out.seconds = 1e-3;
  }
};

}  // namespace

HEADWAY_EXPORT_MODEL(UnaskedRowsModel, "org.headway.faulty.unasked_rows_model",
                     "faulty_unasked_rows", "0.0.1",
                     "Faulty on purpose: writes every sampled row, asked for or not",
                     headway::sdk::no_options)
