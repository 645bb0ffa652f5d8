// Faulty on purpose: the SDK template's FCFS scheduler, except that while other requests run it
// never plans the oldest running one, unless leaving it out is all that would keep the others from
// fitting (so the engine never stalls, and everything finishes once arrivals stop). The oldest
// holds its KV and its slot and gets no token until the younger ones are done: under steady
// traffic its inter-token latency has no bound (helper-133 measured 51 s against 50 ms). Every plan
// is valid; scheduler.no_starvation watches only the waiting queue's head. The suite must report
// scheduler.running_progress as FAIL.
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

class RunningStarverScheduler final : public headway::faulty::TemplateScheduler {
 public:
  RunningStarverScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                          const hw_engine_facts&)
      : TemplateScheduler(options) {}
  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    if (s.running_count >= 2 && others_fit(s)) {
      // The fault: plan as if the oldest (running[0], admission order) were not running; its slot
      // stays taken.
      hw_scheduler_snapshot without_oldest = s;
      ++without_oldest.running;
      --without_oldest.running_count;
      headway::faulty::plan_template_fcfs(without_oldest, plan, budget_, max_seqs_ - 1);
      return;
    }
    headway::faulty::plan_template_fcfs(s, plan, budget_, max_seqs_);
  }

 private:
  // Whether every running request but the oldest fits this step whole, without a preemption.
  bool others_fit(const hw_scheduler_snapshot& s) const {
    uint64_t tokens = 0, blocks = 0;
    for (uint32_t i = 1; i < s.running_count; ++i) {
      const uint32_t left = headway::sdk::remaining_tokens(s.running[i]);
      tokens += left;
      blocks += headway::sdk::extra_blocks(s.running[i], left, s.block_size);
    }
    return tokens <= budget_ && blocks <= s.kv_blocks_free;
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(
    RunningStarverScheduler, "org.headway.faulty.running_starver", "faulty_running_starver",
    "0.0.1", "Faulty on purpose: leaves the oldest running request out while others run",
    headway::faulty::kLimitOptions)
