// A test-only step scheduler that breaks its own promise: it declares a budget of 8 tokens per step
// and then plans every request's whole remaining work. The engine must reject such a plan without
// executing any of it.
#include <headway/plugin.hpp>

namespace {

class OverBudgetScheduler final : public headway::sdk::StepScheduler {
 public:
  OverBudgetScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                      const hw_engine_facts&) {}

  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 8, 16};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    for (uint32_t i = 0; i < s.running_count; ++i) {
      plan.add_slice(s.running[i], headway::sdk::remaining_tokens(s.running[i]));
    }
    for (uint32_t i = 0; i < s.waiting_count; ++i) {
      plan.add_slice(s.waiting[i], headway::sdk::remaining_tokens(s.waiting[i]));
    }
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(OverBudgetScheduler, "org.headway.test.over_budget", "test_over_budget",
                         "0.0.1", "Test only: plans more tokens than its declared budget",
                         headway::sdk::no_options)
