// Faulty on purpose: the SDK template's FCFS scheduler, each step's budget jittered by a sequence
// seeded once per process (a static seeded from std::random_device when the library loads, as a
// "jitter to avoid lockstep" might be). Within one process every instance plans a trace the same
// way, so scheduler.deterministic passes; another process plans it differently, and two runs of one
// `headway simulate` report different latencies. The suite must report
// scheduler.same_across_processes as FAIL (core from step-scheduler-core-v3).
#include <headway/plugin.hpp>
#include <headway/sdk/sampling.hpp>
#include <random>

#include "template_fcfs.h"

namespace {

// The fault: 64 bits drawn per process.
const uint64_t kSaltOfThisProcess =
    (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();

class ProcessSeededScheduler final : public headway::faulty::TemplateScheduler {
 public:
  ProcessSeededScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                         const hw_engine_facts&)
      : TemplateScheduler(options) {}

 protected:
  // The budget, or one or two tokens less, a new draw each step: the same within a process for
  // every instance (each counts its own steps from 0), another sequence in another process. (Kept
  // that close to the budget so that the plans stay those of the template, which passes every
  // other test: budgets of 64 to 319 tokens led it into a stall on one trace.)
  uint32_t step_budget() const override {
    const uint64_t draw = headway::sdk::sampling::mix64(kSaltOfThisProcess + steps_++);
    return budget_ - static_cast<uint32_t>(std::min<uint64_t>(draw % 3, budget_ - 1));
  }

 private:
  mutable uint64_t steps_ = 0;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(ProcessSeededScheduler, "org.headway.faulty.process_seeded",
                         "faulty_process_seeded", "0.0.1",
                         "Faulty on purpose: chunks prefills to a budget drawn once per process",
                         headway::faulty::kLimitOptions)
