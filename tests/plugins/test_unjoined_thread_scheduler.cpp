// A scheduler that starts a thread and never joins it, as a careless plugin may: destroying it ends
// the process in std::thread's destructor (std::terminate). The host cannot prevent that, but its
// message must name the plugin call that ended the process.
#include <chrono>
#include <headway/plugin.hpp>
#include <thread>

namespace {

class UnjoinedThreadScheduler final : public headway::sdk::StepScheduler {
 public:
  UnjoinedThreadScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                          const hw_engine_facts&)
      : worker_([] { std::this_thread::sleep_for(std::chrono::hours(1)); }) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 512, 16};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {}

 private:
  std::thread worker_;  // never joined: its destructor calls std::terminate
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(UnjoinedThreadScheduler, "org.headway.test.unjoined_thread",
                         "test_unjoined_thread", "0.0.1", "Leaves a thread unjoined at destroy",
                         headway::sdk::no_options)
