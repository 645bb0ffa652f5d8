// A wall-clock model that samples itself and returns logits rows only where the host asks
// (hw_model_info.returns_logits_on_request, ABI 1.5), the way the cuda model does on a GPU, so that
// the engine's and the service's side of that contract are tested on machines without one.
// Its rows put one favourite token per position (rows_on_request_rule.h); its own sampler picks
// it when greedy and the token after it otherwise, so that a test sampling at a temperature tells
// the host's tokens from the model's. It also writes a row per position where a slice asks
// (returns_prompt_logits), and is conformant (model.logits_on_request among others).
#include <headway/plugin.hpp>
#include <string>

#include "rows_on_request_rule.h"
#include "toy_model_info.h"

namespace {

namespace rule = headway::test::rows_on_request;

class RowsOnRequestModel final : public headway::sdk::Model {
 public:
  RowsOnRequestModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {}

  hw_model_info info() const override {
    hw_model_info i = headway::test::toy_model_info(rule::kVocab);
    i.needs_token_ids = 1;
    i.returns_prompt_logits = 1;
    i.returns_logits_on_request = 1;
    return i;
  }

  void init_kv(uint32_t, uint32_t) override {}

  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    const hw_model_info me = info();
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      const uint32_t rows =
          headway::sdk::logits_rows(s, headway::sdk::sample_row_wanted(batch, i, me));
      if (rows > 0 && (out.logits == nullptr || row + rows > out.logits_rows)) {
        throw headway::sdk::Error(HW_INVALID_ARGUMENT,
                                  "test_rows_on_request_model: the host's logits buffer holds " +
                                      std::to_string(out.logits_rows) + " rows, slice " +
                                      std::to_string(i) + " needs rows up to " +
                                      std::to_string(row + rows));
      }
      // The slice's last `rows` positions, each row the distribution of the token after it.
      for (uint32_t r = 0; r < rows; ++r) {
        const uint32_t t = s.tokens - rows + r;
        float* logits = out.logits + size_t{row + r} * rule::kVocab;
        const int32_t best = rule::favourite(s.token_ids[t], s.start + t);
        for (uint32_t v = 0; v < rule::kVocab; ++v) {
          logits[v] = static_cast<int32_t>(v) == best ? rule::kFavouriteLogit : 0.0f;
        }
      }
      row += rows;
      if (s.sample != 0) {
        out.sampled[i] =
            rule::device_pick(s.token_ids[s.tokens - 1], s.start + s.tokens - 1, s.temperature);
      }
    }
    // The host sized its buffer by the same rule: a different count means the two disagree.
    if (row != out.logits_rows) {
      throw headway::sdk::Error(HW_INVALID_ARGUMENT, "test_rows_on_request_model: wrote " +
                                                         std::to_string(row) +
                                                         " logits rows, the host expected " +
                                                         std::to_string(out.logits_rows));
    }
  }
};

}  // namespace

HEADWAY_EXPORT_MODEL(RowsOnRequestModel, "org.headway.test.rows_on_request_model",
                     "test_rows_on_request_model", "0.0.1",
                     "Test: samples itself, returns logits rows where the host asks",
                     headway::sdk::no_options)
