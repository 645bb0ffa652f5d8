// Faulty on purpose: its first schedule() never returns. headway-conformance must kill the profile
// after --timeout and still print a verdict and write its report: a FAIL (suite.completed) saying
// the profile was still running.
#include <chrono>
#include <headway/plugin.hpp>
#include <thread>

namespace {

class HangingScheduler final : public headway::sdk::StepScheduler {
 public:
  HangingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                   const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 512, 64};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(HangingScheduler, "org.headway.faulty.hanging", "faulty_hanging", "0.0.1",
                         "Faulty on purpose: schedule() never returns", headway::sdk::no_options)
