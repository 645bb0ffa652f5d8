// Faulty on purpose: keeps 4 KiB more heap on every schedule() call (and plans nothing, which is a
// valid plan). A server running it would run out of memory after hours; the suite must report
// scheduler.steady_state_heap as FAIL. The blocks stay reachable from a static list, so
// LeakSanitizer does not report them at exit: the growth, not a lost pointer, is the fault.
#include <headway/plugin.hpp>
#include <memory>
#include <mutex>
#include <vector>

namespace {

class LeakingScheduler final : public headway::sdk::StepScheduler {
 public:
  LeakingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                   const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 512, 64};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {
    static std::mutex mutex;
    static std::vector<std::unique_ptr<char[]>> kept;
    std::lock_guard lock(mutex);
    kept.push_back(std::make_unique<char[]>(4096));
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(LeakingScheduler, "org.headway.faulty.leaking", "faulty_leaking", "0.0.1",
                         "Faulty on purpose: keeps 4 KiB of heap per step",
                         headway::sdk::no_options)
