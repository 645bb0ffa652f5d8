// Faulty on purpose: declares a budget of 32 tokens per step, then plans every request's whole
// remaining work. The engine's validator refuses the plan; the suite must report
// scheduler.plans_valid as FAIL.
#include <headway/plugin.hpp>

namespace {

class OverBudgetScheduler final : public headway::sdk::StepScheduler {
 public:
  OverBudgetScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                      const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 32, 64};
  }
  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    for (uint32_t i = 0; i < s.running_count; ++i) {
      plan.add_slice(s.running[i], headway::sdk::remaining_tokens(s.running[i]));
    }
    for (uint32_t i = 0; i < s.waiting_count && s.running_count + i < 64; ++i) {
      plan.add_slice(s.waiting[i], headway::sdk::remaining_tokens(s.waiting[i]));
    }
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(OverBudgetScheduler, "org.headway.faulty.over_budget",
                         "faulty_over_budget", "0.0.1",
                         "Faulty on purpose: plans beyond its declared budget",
                         headway::sdk::no_options)
