// A scheduler that calls exit(0) in its first schedule(), as a careless plugin (or a library it
// uses) may: the host must not end with status 0 and no output, as if the run had succeeded.
#include <cstdlib>
#include <headway/plugin.hpp>

namespace {

class ExitingScheduler final : public headway::sdk::StepScheduler {
 public:
  ExitingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                   const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 512, 16};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override { std::exit(0); }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(ExitingScheduler, "org.headway.test.exiting", "test_exiting", "0.0.1",
                         "Calls exit(0) in schedule()", headway::sdk::no_options)
