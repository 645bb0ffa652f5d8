// Faulty on purpose: the SDK template's FCFS scheduler (sdk/templates/step_scheduler), except that
// every 50th schedule() call computes for 5 ms (as a periodic rebuild of some index would). Its
// mean cost stays near 100 us, which scheduler.step_cost only warns about, but on those steps every
// stream of the engine stalls for 5 ms more. The suite must report scheduler.step_cost_tail as
// FAIL.
#include <time.h>

#include <cstdint>
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

class StallingScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 4096;
  static constexpr uint32_t kMaxSeqs = 128;

  StallingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                    const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    if (++calls_ % 50 == 0) {  // the fault: CPU time, not a sleep, as real work would take
      const double until = thread_cpu_seconds() + 5e-3;
      while (thread_cpu_seconds() < until) {
      }
    }
    headway::faulty::plan_template_fcfs(s, plan, kBudget, kMaxSeqs);
  }

 private:
  uint64_t calls_ = 0;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(StallingScheduler, "org.headway.faulty.stalling", "faulty_stalling",
                         "0.0.1", "Faulty on purpose: every 50th step computes for 5 ms",
                         headway::sdk::no_options)
