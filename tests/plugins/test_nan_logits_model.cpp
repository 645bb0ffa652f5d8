// A model on the virtual clock whose every logits row is NaN (as a model whose weights overflowed
// gives): the engine samples token 0 from such rows, and must say so in the log, throttled.
#include <cmath>
#include <headway/plugin.hpp>

#include "toy_model_info.h"

namespace {

constexpr uint32_t kVocab = 32;

class NanLogitsModel final : public headway::sdk::Model {
 public:
  NanLogitsModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {}

  hw_model_info info() const override {
    hw_model_info i = headway::test::toy_model_info(kVocab);
    i.reports_duration = 1;
    i.returns_logits = 1;
    return i;
  }

  void init_kv(uint32_t, uint32_t) override {}

  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    uint32_t rows = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) rows += batch.slices[i].sample != 0 ? 1 : 0;
    for (uint64_t v = 0; v < uint64_t{rows} * kVocab; ++v) out.logits[v] = std::nanf("");
    out.seconds = 1e-3;
  }
};

}  // namespace

HEADWAY_EXPORT_MODEL(NanLogitsModel, "org.headway.test.nan_logits_model", "test_nan_logits",
                     "0.0.1", "Test: every logits row is NaN", headway::sdk::no_options)
