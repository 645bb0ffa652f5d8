// A step scheduler template: running requests first (preempting the youngest when KV runs out),
// then waiting ones first come, first served, chunked to the budget. Copy this folder, rename the
// class and the plugin names, change schedule().
// Check it with: headway-conformance --plugin build/my_scheduler.so
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
    uint32_t end = s.running_count;  // running requests from `end` on were preempted this step
    for (uint32_t i = 0; i < end && budget > 0; ++i) {
      const hw_request_view& r = s.running[i];
      const uint32_t tokens = std::min(headway::sdk::remaining_tokens(r), budget);
      const uint32_t need = headway::sdk::extra_blocks(r, tokens, s.block_size);
      // Out of KV: preempt the most recently admitted request (it is recomputed later). Without
      // this, running requests that all need a block would wait for each other forever.
      while (need > free_blocks && end > i + 1) {
        --end;
        plan.preempt(s.running[end].id);
        free_blocks += headway::sdk::blocks_freed_by_preempting(s.running[end]);
      }
      if (need > free_blocks) return;
      plan.add_slice(r, tokens);
      budget -= tokens;
      free_blocks -= need;
    }
    if (end < s.running_count) return;  // admitting now would take the blocks just freed
    uint32_t running = s.running_count;
    for (uint32_t i = 0; i < s.waiting_count && running < max_seqs_ && budget > 0; ++i) {
      const hw_request_view& w = s.waiting[i];
      const uint32_t tokens = std::min(headway::sdk::remaining_tokens(w), budget);
      const uint32_t need = headway::sdk::extra_blocks(w, tokens, s.block_size);
      if (need > free_blocks) break;  // first come, first served: nobody overtakes the head
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
