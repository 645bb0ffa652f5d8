// Faulty on purpose: shortest-prompt-first that sorts the waiting queue it was lent, in place (a
// const_cast away from the SDK's read-only view), instead of sorting its own list of indices. The
// waiting queue in a snapshot is the engine's own, so the sort reorders the engine's queue behind
// its back (preempted requests no longer first, arrival order lost). The suite must report
// scheduler.snapshot_read_only as FAIL.
#include <algorithm>
#include <cstdint>
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

class SortingScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 4096;
  static constexpr uint32_t kMaxSeqs = 128;

  SortingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                   const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    // The fault: the snapshot is borrowed read-only.
    auto* waiting = const_cast<hw_request_view*>(s.waiting);
    std::stable_sort(
        waiting, waiting + s.waiting_count, [](const hw_request_view& a, const hw_request_view& b) {
          return a.total_tokens - a.computed_tokens < b.total_tokens - b.computed_tokens;
        });
    headway::faulty::plan_template_fcfs(s, plan, kBudget, kMaxSeqs);
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(SortingScheduler, "org.headway.faulty.sorting", "faulty_sorting", "0.0.1",
                         "Faulty on purpose: sorts the engine's waiting queue in place",
                         headway::sdk::no_options)
