// A scheduler whose first schedule() dies of a signal, as a plugin with a memory bug does:
// raise(SIGSEGV) rather than a real null store, which the sanitizer build's UBSan would report
// (and end the process) before any signal. The host must say which plugin call crashed.
#include <csignal>
#include <headway/plugin.hpp>

namespace {

class SignallingScheduler final : public headway::sdk::StepScheduler {
 public:
  SignallingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                      const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 512, 16};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {
    std::raise(SIGSEGV);
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(SignallingScheduler, "org.headway.test.signalling", "test_signalling",
                         "0.0.1", "Raises SIGSEGV in schedule()", headway::sdk::no_options)
