// A wall-clock model that is slow where a real one can be: its first forward() takes
// `first_forward_s` (a GPU that hangs for a while: simulate must say which engine is in a long
// step), and create() takes `load_s` (a large checkpoint loading: serve must take a signal during
// it). It logs when its load begins, so that a test knows start-up is under way.
#include <chrono>
#include <headway/plugin.hpp>
#include <string>
#include <thread>

#include "toy_model_info.h"

namespace {

constexpr uint32_t kVocab = 64;

constexpr hw_option_spec kOptions[] = {
    headway::sdk::double_option("first_forward_s", 1.5, 0.0, 3600.0,
                                "How long the first forward() takes"),
    headway::sdk::double_option("load_s", 0.0, 0.0, 3600.0, "How long create() takes"),
};

void sleep_for_seconds(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

class SlowModel final : public headway::sdk::Model {
 public:
  SlowModel(const headway::sdk::Host& host, const headway::sdk::Options& options,
            const std::string&)
      : first_forward_s_(options.get_double("first_forward_s")) {
    const double load_s = options.get_double("load_s");
    if (load_s > 0) {
      host.log(HW_LOG_INFO, "test_slow: loading for " + std::to_string(load_s) + " s");
      sleep_for_seconds(load_s);
    }
  }

  hw_model_info info() const override {
    hw_model_info i = headway::test::toy_model_info(kVocab);
    i.returns_logits = 1;
    return i;
  }

  void init_kv(uint32_t, uint32_t) override {}

  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    if (forwards_++ == 0) sleep_for_seconds(first_forward_s_);
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      if (batch.slices[i].sample == 0) continue;
      float* logits = out.logits + static_cast<size_t>(row) * kVocab;
      for (uint32_t v = 0; v < kVocab; ++v) logits[v] = v == 1 ? 4.0f : 0.0f;
      ++row;
    }
  }

 private:
  const double first_forward_s_;
  uint64_t forwards_ = 0;
};

}  // namespace

HEADWAY_EXPORT_MODEL(SlowModel, "org.headway.test.slow_model", "test_slow", "0.0.1",
                     "Test: a slow first forward() and, with load_s, a slow create()", kOptions)
