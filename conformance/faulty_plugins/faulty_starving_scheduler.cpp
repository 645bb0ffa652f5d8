// Faulty on purpose: valid plans, every request finishes, but it admits a waiting request only when
// nothing runs, so the second waiting request waits while the budget sits idle. The suite must
// report scheduler.no_starvation as FAIL (and nothing about plan validity).
#include <algorithm>
#include <headway/plugin.hpp>

namespace {

using headway::sdk::extra_blocks;
using headway::sdk::remaining_tokens;

class StarvingScheduler final : public headway::sdk::StepScheduler {
 public:
  StarvingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                    const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 8192, 256};
  }
  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    uint32_t budget = 8192;
    for (uint32_t i = 0; i < s.running_count; ++i) {
      const uint32_t tokens = std::min(remaining_tokens(s.running[i]), budget);
      if (tokens == 0 || extra_blocks(s.running[i], tokens, s.block_size) > s.kv_blocks_free) {
        continue;
      }
      plan.add_slice(s.running[i], tokens);
      budget -= tokens;
    }
    if (s.running_count == 0 && s.waiting_count > 0) {
      const uint32_t tokens = std::min(remaining_tokens(s.waiting[0]), budget);
      if (extra_blocks(s.waiting[0], tokens, s.block_size) <= s.kv_blocks_free) {
        plan.add_slice(s.waiting[0], tokens);
      }
    }
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(StarvingScheduler, "org.headway.faulty.starving", "faulty_starving",
                         "0.0.1", "Faulty on purpose: one request at a time",
                         headway::sdk::no_options)
