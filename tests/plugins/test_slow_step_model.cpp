// A wall-clock model whose first forward() takes 1.5 s, as a model on a GPU that hangs for a
// while: simulate must say which engine is in a long step while it waits (LongCallWatch).
#include <chrono>
#include <headway/plugin.hpp>
#include <thread>

#include "toy_model_info.h"

namespace {

constexpr uint32_t kVocab = 64;

class SlowStepModel final : public headway::sdk::Model {
 public:
  SlowStepModel(const headway::sdk::Host&, const headway::sdk::Options&, const std::string&) {}

  hw_model_info info() const override {
    hw_model_info i = headway::test::toy_model_info(kVocab);
    i.returns_logits = 1;
    return i;
  }

  void init_kv(uint32_t, uint32_t) override {}

  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    if (forwards_++ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      if (batch.slices[i].sample == 0) continue;
      float* logits = out.logits + static_cast<size_t>(row) * kVocab;
      for (uint32_t v = 0; v < kVocab; ++v) logits[v] = v == 1 ? 4.0f : 0.0f;
      ++row;
    }
  }

 private:
  uint64_t forwards_ = 0;
};

}  // namespace

HEADWAY_EXPORT_MODEL(SlowStepModel, "org.headway.test.slow_step_model", "test_slow_step", "0.0.1",
                     "Test: the first forward() takes 1.5 s", headway::sdk::no_options)
