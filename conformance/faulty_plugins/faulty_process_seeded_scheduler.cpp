// Faulty on purpose: the SDK template's FCFS scheduler, chunking prefills to a step budget drawn
// once per process (a static seeded from std::random_device when the library loads, as a "jitter
// to avoid lockstep" might be). Within one process every instance plans a trace the same way, so
// scheduler.deterministic passes; another process plans it differently, and two runs of one
// `headway simulate` report different latencies. The suite must report
// scheduler.same_across_processes as FAIL (core from step-scheduler-core-v3).
#include <headway/plugin.hpp>
#include <random>

#include "template_fcfs.h"

namespace {

// The fault: one of 4,000 budgets, drawn per process.
const uint32_t kBudgetOfThisProcess = 64 + std::random_device{}() % 4000;

class ProcessSeededScheduler final : public headway::faulty::TemplateScheduler {
 public:
  ProcessSeededScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                         const hw_engine_facts&)
      : TemplateScheduler(options) {}

 protected:
  uint32_t step_budget() const override { return std::min(budget_, kBudgetOfThisProcess); }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(ProcessSeededScheduler, "org.headway.faulty.process_seeded",
                         "faulty_process_seeded", "0.0.1",
                         "Faulty on purpose: chunks prefills to a budget drawn once per process",
                         headway::faulty::kLimitOptions)
