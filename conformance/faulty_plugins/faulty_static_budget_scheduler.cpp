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

class StaticBudgetScheduler final : public headway::sdk::StepScheduler {
 public:
  StaticBudgetScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                        const hw_engine_facts&)
      : budget_(static_cast<uint32_t>(options.get_int("max_num_batched_tokens"))),
        max_seqs_(static_cast<uint32_t>(options.get_int("max_num_seqs"))) {
    budget_of_the_last_instance = budget_;
  }
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), budget_, max_seqs_};
  }
  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    headway::faulty::plan_template_fcfs(s, plan, budget_of_the_last_instance, max_seqs_);
  }

 private:
  uint32_t budget_;
  uint32_t max_seqs_;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(StaticBudgetScheduler, "org.headway.faulty.static_budget",
                         "faulty_static_budget", "0.0.1",
                         "Faulty on purpose: plans with the budget of the last instance created",
                         headway::faulty::kLimitOptions)
