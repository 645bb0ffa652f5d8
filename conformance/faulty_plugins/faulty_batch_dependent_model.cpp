// Faulty on purpose: a tiny logits model whose output for a request depends on how many slices
// share its batch (as a kernel that normalises across the batch would). The suite must report
// model.batch_invariance as FAIL; chunked prefill alone is handled correctly.
#include <cmath>
#include <headway/plugin.hpp>

namespace {

constexpr uint32_t kVocab = 64;

class BatchDependentModel final : public headway::sdk::Model {
 public:
  BatchDependentModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {
  }
  hw_model_info info() const override {
    hw_model_info i{};
    i.struct_size = sizeof(hw_model_info);
    i.layers = 1;
    i.hidden = 8;
    i.heads = 1;
    i.kv_heads = 1;
    i.head_dim = 8;
    i.vocab = kVocab;
    i.max_model_len = 4096;
    i.eos_token = UINT32_MAX;
    i.kv_bytes_per_token = 32;
    i.kv_capacity_tokens = 1 << 16;
    i.needs_token_ids = 1;
    i.reports_duration = 1;
    i.returns_logits = 1;
    return i;
  }
  void init_kv(uint32_t, uint32_t) override {}
  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      if (!s.sample) continue;
      const float last = static_cast<float>(s.token_ids[s.tokens - 1]);
      const float position = static_cast<float>(s.start + s.tokens - 1);
      for (uint32_t v = 0; v < kVocab; ++v) {
        // The bug: the batch size leaks into every logit.
        out.logits[row * kVocab + v] =
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
