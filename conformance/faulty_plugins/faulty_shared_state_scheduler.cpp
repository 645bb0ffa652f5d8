// Faulty on purpose: the SDK template's FCFS scheduler (sdk/templates/step_scheduler), except that
// its step budget alternates between full and half on a counter that all its instances share (a
// static where a member was meant). Alone, each instance plans the same trace the same way every
// time, so every single-instance test passes; two engines' instances planning at once disturb each
// other's plans. The suite must report scheduler.independent_instances as FAIL.
#include <atomic>
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

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
    const uint32_t budget = steps_of_every_instance++ % 2 == 0 ? kBudget : kBudget / 2;
    headway::faulty::plan_template_fcfs(s, plan, budget, kMaxSeqs);
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(SharedStateScheduler, "org.headway.faulty.shared_state",
                         "faulty_shared_state", "0.0.1",
                         "Faulty on purpose: instances share a step counter",
                         headway::sdk::no_options)
