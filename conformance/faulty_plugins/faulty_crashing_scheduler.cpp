// Faulty on purpose: its first schedule() dereferences a null pointer. The suite runs the profile
// in a child process, so headway-conformance must still print a verdict and write its report: a
// FAIL (suite.completed) naming the signal, and NOT CONFORMANT.
#include <headway/plugin.hpp>

namespace {

class CrashingScheduler final : public headway::sdk::StepScheduler {
 public:
  CrashingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                    const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 512, 64};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {
    volatile int* nowhere = nullptr;
    *nowhere = 1;  // NOLINT(clang-analyzer-core.NullDereference): the fault this plugin is for
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(CrashingScheduler, "org.headway.faulty.crashing", "faulty_crashing",
                         "0.0.1", "Faulty on purpose: crashes in schedule()",
                         headway::sdk::no_options)
