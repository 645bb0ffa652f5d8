// Faulty on purpose: the SDK template's FCFS scheduler (sdk/templates/step_scheduler), except that
// its step budget alternates between full and half on a counter that all its instances share (a
// static where a member was meant). Alone, each instance plans the same trace the same way every
// time, so every single-instance test passes; two engines' instances planning at once disturb each
// other's plans. The suite must report scheduler.independent_instances as FAIL.
#include <algorithm>
#include <atomic>
#include <headway/plugin.hpp>

namespace {

using headway::sdk::extra_blocks;
using headway::sdk::remaining_tokens;

std::atomic<uint64_t> steps_of_every_instance{0};  // the fault

class SharedStateScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 4096;
  static constexpr uint32_t kMaxSeqs = 128;

  SharedStateScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                       const hw_engine_facts&) {
    steps_of_every_instance = 0;  // meant as "this instance starts counting"
  }
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    uint32_t budget = steps_of_every_instance++ % 2 == 0 ? kBudget : kBudget / 2;
    uint32_t free_blocks = s.kv_blocks_free;
    uint32_t end = s.running_count;  // running requests from `end` on are preempted this step
    for (uint32_t i = 0; i < end && budget > 0; ++i) {
      const hw_request_view& r = s.running[i];
      const uint32_t tokens = std::min(remaining_tokens(r), budget);
      const uint32_t need = extra_blocks(r, tokens, s.block_size);
      while (need > free_blocks && end > i + 1) {
        --end;
        plan.preempt(s.running[end].id);
        free_blocks += s.running[end].blocks_held;
      }
      if (need > free_blocks) return;
      plan.add_slice(r, tokens);
      budget -= tokens;
      free_blocks -= need;
    }
    if (end < s.running_count) return;
    uint32_t running = s.running_count;
    for (uint32_t i = 0; i < s.waiting_count && running < kMaxSeqs && budget > 0; ++i) {
      const hw_request_view& w = s.waiting[i];
      const uint32_t tokens = std::min(remaining_tokens(w), budget);
      const uint32_t need = extra_blocks(w, tokens, s.block_size);
      if (need > free_blocks) break;
      plan.add_slice(w, tokens);
      budget -= tokens;
      free_blocks -= need;
      ++running;
    }
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(SharedStateScheduler, "org.headway.faulty.shared_state",
                         "faulty_shared_state", "0.0.1",
                         "Faulty on purpose: instances share a step counter",
                         headway::sdk::no_options)
