// Faulty on purpose: the SDK template's FCFS scheduler, reading the waiting queue through a copy
// of its first indices in a fixed array of 1,024 (its author "knew" queues stay short), filled
// with a checked at() that throws past it. No snapshot of the v1 traces holds more than a few
// hundred waiting requests; a burst past a server's capacity does (max_waiting is unbounded by
// default), and then every step fails. (Unchecked, the same array is a stack overflow in the
// engine thread.) The suite must report scheduler.deep_queue as FAIL.
#include <array>
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

class ShortQueueScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 4096;
  static constexpr uint32_t kMaxSeqs = 128;

  ShortQueueScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                      const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }
  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    for (uint32_t i = 0; i < s.waiting_count; ++i) order_.at(i) = i;  // the fault
    headway::faulty::plan_template_fcfs(s, plan, kBudget, kMaxSeqs);
  }

 private:
  std::array<uint32_t, 1024> order_{};
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(ShortQueueScheduler, "org.headway.faulty.short_queue",
                         "faulty_short_queue", "0.0.1",
                         "Faulty on purpose: fails with more than 1,024 requests waiting",
                         headway::sdk::no_options)
