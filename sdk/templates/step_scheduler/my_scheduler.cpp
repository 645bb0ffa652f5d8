// A step scheduler template: first come, first served, whole prompts when they fit the budget,
// decodes first. Copy this folder, rename the class and the plugin names, change schedule().
#include <algorithm>
#include <headway/plugin.hpp>

namespace {

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("max_num_batched_tokens", 4096, 1, 1 << 24, "Tokens per step."),
    headway::sdk::int_option("max_num_seqs", 128, 1, 1 << 16, "Requests running at once."),
};

class MyScheduler final : public headway::sdk::StepScheduler {
 public:
  MyScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
              const hw_engine_facts&)
      : budget_(static_cast<uint32_t>(options.get_int("max_num_batched_tokens"))),
        max_seqs_(static_cast<uint32_t>(options.get_int("max_num_seqs"))) {}

  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), budget_, max_seqs_};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    uint32_t budget = budget_;
    uint32_t free_blocks = s.kv_blocks_free;
    for (uint32_t i = 0; i < s.running_count; ++i) {
      const hw_request_view& r = s.running[i];
      uint32_t tokens = std::min(headway::sdk::remaining_tokens(r), budget);
      uint32_t need = headway::sdk::extra_blocks(r, tokens, s.block_size);
      if (tokens == 0 || need > free_blocks) continue;
      plan.add_slice(r, tokens);
      budget -= tokens;
      free_blocks -= need;
    }
    uint32_t running = s.running_count;
    for (uint32_t i = 0; i < s.waiting_count && running < max_seqs_; ++i) {
      const hw_request_view& w = s.waiting[i];
      uint32_t tokens = std::min(headway::sdk::remaining_tokens(w), budget);
      uint32_t need = headway::sdk::extra_blocks(w, tokens, s.block_size);
      if (tokens == 0 || need > free_blocks) break;
      plan.add_slice(w, tokens);
      budget -= tokens;
      free_blocks -= need;
      ++running;
    }
  }

 private:
  uint32_t budget_;
  uint32_t max_seqs_;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(MyScheduler, "com.example.scheduler.mine", "mine", "0.1.0",
                         "Template scheduler: FCFS, decodes first", kOptions)
