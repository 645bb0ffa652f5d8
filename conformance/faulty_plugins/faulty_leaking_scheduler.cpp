// Faulty on purpose: keeps 4 KiB more heap on every schedule() call (and plans nothing, which is a
// valid plan). A server running it would run out of memory after hours; the suite must report
// scheduler.steady_state_heap as FAIL. The blocks stay reachable from a static list, so
// LeakSanitizer does not report them at exit: the growth, not a lost pointer, is the fault.
// Options: `plans = true` plans as the SDK template's FCFS does (so that the traces run to their
// end and the determinism test compares them); `unreachable = true` drops the pointers, a leak
// LeakSanitizer reports at exit (for the suite's replay in another process, which must not take
// that for plans that differ).
#include <headway/plugin.hpp>
#include <memory>
#include <mutex>
#include <vector>

#include "template_fcfs.h"

namespace {

constexpr hw_option_spec kOptions[] = {
    headway::sdk::bool_option("plans", false, "Plan as the template's FCFS (else plan nothing)."),
    headway::sdk::bool_option("unreachable", false, "Lose the pointers to what is kept."),
};

class LeakingScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 512;
  static constexpr uint32_t kMaxSeqs = 64;

  LeakingScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                   const hw_engine_facts&)
      : plans_(options.get_bool("plans")), unreachable_(options.get_bool("unreachable")) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }
  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    if (unreachable_) {
      // The fault itself: nothing points at the block once this returns.
      // NOLINTBEGIN(clang-analyzer-cplusplus.NewDeleteLeaks)
      // Through a volatile pointer: a compiler may leave out an allocation nothing reads.
      char* volatile lost = new char[4096];
      lost[0] = 1;
    } else {
      static std::mutex mutex;
      static std::vector<std::unique_ptr<char[]>> kept;
      std::lock_guard lock(mutex);
      kept.push_back(std::make_unique<char[]>(4096));
    }
    if (plans_) headway::faulty::plan_template_fcfs(s, plan, kBudget, kMaxSeqs);
    // NOLINTEND(clang-analyzer-cplusplus.NewDeleteLeaks)
  }

 private:
  const bool plans_;
  const bool unreachable_;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(LeakingScheduler, "org.headway.faulty.leaking", "faulty_leaking", "0.0.1",
                         "Faulty on purpose: keeps 4 KiB of heap per step", kOptions)
