// Faulty on purpose: the SDK template's FCFS scheduler, keeping its step budget in a static that
// every create() writes (a "config singleton"). Each instance declares its own options' budget,
// but plans with the last instance's: alone, or beside an instance with the same options, it is
// right; in a deployment whose engines take different budgets (a prefill pool's beside a decode
// pool's) one engine plans over its declared budget (the engine refuses the plan) or far under it.
// The suite must report scheduler.independent_instances as FAIL (it runs two instances on traces
// of different options from step-scheduler-core-v2 on).
#include <atomic>
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

std::atomic<uint32_t> budget_of_the_last_instance{0};  // the fault

class StaticBudgetScheduler final : public headway::faulty::TemplateScheduler {
 public:
  StaticBudgetScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                        const hw_engine_facts&)
      : TemplateScheduler(options) {
    budget_of_the_last_instance = budget_;
  }

 protected:
  uint32_t step_budget() const override { return budget_of_the_last_instance; }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(StaticBudgetScheduler, "org.headway.faulty.static_budget",
                         "faulty_static_budget", "0.0.1",
                         "Faulty on purpose: plans with the budget of the last instance created",
                         headway::faulty::kLimitOptions)
