// Faulty on purpose: the SDK template's FCFS scheduler (sdk/templates/step_scheduler), except that
// every 25th schedule() call sleeps for 2 ms, as a plugin would that asks a remote service or reads
// a file for its policy. The sleep takes no CPU time, so scheduler.step_cost_tail does not see it,
// and its mean (about 80 us) stays under scheduler.step_cost's floor; yet on those steps every
// stream of the engine waits 2 ms more. The suite must report scheduler.never_waits as FAIL.
#include <chrono>
#include <cstdint>
#include <headway/plugin.hpp>
#include <thread>

#include "template_fcfs.h"

namespace {

class SleepingScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 4096;
  static constexpr uint32_t kMaxSeqs = 128;

  SleepingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                    const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    if (++calls_ % 25 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    headway::faulty::plan_template_fcfs(s, plan, kBudget, kMaxSeqs);
  }

 private:
  uint64_t calls_ = 0;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(SleepingScheduler, "org.headway.faulty.sleeping", "faulty_sleeping",
                         "0.0.1", "Faulty on purpose: every 25th step sleeps for 2 ms",
                         headway::sdk::no_options)
