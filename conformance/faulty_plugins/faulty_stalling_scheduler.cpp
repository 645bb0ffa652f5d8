// Faulty on purpose: the SDK template's FCFS scheduler (sdk/templates/step_scheduler), except that
// every 50th schedule() call computes for 5 ms (as a periodic rebuild of some index would). Its
// mean cost stays near 100 us, which scheduler.step_cost only warns about, but on those steps every
// stream of the engine stalls for 5 ms more. The suite must report scheduler.step_cost_tail as
// FAIL. Its options set the period and the stall (`every = 200, stall_us = 50000`: a rare stall,
// under the 1% rule, which the tail test's largest call must catch).
#include <time.h>

#include <cstdint>
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("every", 50, 1, 1 << 20, "Stall in every Nth schedule() call."),
    headway::sdk::int_option("stall_us", 5000, 0, 1000000, "CPU time of a stall, microseconds."),
};

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

class StallingScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 4096;
  static constexpr uint32_t kMaxSeqs = 128;

  StallingScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                    const hw_engine_facts&)
      : every_(static_cast<uint64_t>(options.get_int("every"))),
        stall_seconds_(1e-6 * static_cast<double>(options.get_int("stall_us"))) {}
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    if (++calls_ % every_ == 0) {  // the fault: CPU time, not a sleep, as real work would take
      const double until = thread_cpu_seconds() + stall_seconds_;
      while (thread_cpu_seconds() < until) {
      }
    }
    headway::faulty::plan_template_fcfs(s, plan, kBudget, kMaxSeqs);
  }

 private:
  const uint64_t every_;
  const double stall_seconds_;
  uint64_t calls_ = 0;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(StallingScheduler, "org.headway.faulty.stalling", "faulty_stalling",
                         "0.0.1", "Faulty on purpose: every 50th step computes for 5 ms", kOptions)
