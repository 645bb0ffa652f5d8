// A test-only step scheduler that livelocks: it admits the first waiting request with a chunk of 8
// prompt tokens, preempts it at the next step, and again for ever, so no token is ever sampled
// while every step does something (the engine's "planned nothing" check never fires). With
// `preemptions` > 0 it stops doing so after that many preemptions and runs every request to its
// end, first-come first-served: the engine must allow exactly livelock_bound() of them.
#include <algorithm>
#include <cstdint>
#include <headway/plugin.hpp>

namespace {

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("preemptions", 0, 0, 1 << 30,
                             "Preemptions before it plans normally; 0: for ever."),
};

class LivelockingScheduler final : public headway::sdk::StepScheduler {
 public:
  LivelockingScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                       const hw_engine_facts&)
      : limit_(static_cast<uint64_t>(options.get_int("preemptions"))) {}

  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 4096, 16};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    if (limit_ == 0 || preempted_ < limit_) {
      if (s.running_count > 0) {
        plan.preempt(s.running[0].id);
        ++preempted_;
      } else if (s.waiting_count > 0) {
        plan.add_slice(s.waiting[0],
                       std::min<uint32_t>(8, headway::sdk::remaining_tokens(s.waiting[0])));
      }
      return;
    }
    uint32_t budget = 4096;
    for (uint32_t i = 0; i < s.running_count && budget > 0; ++i) {
      const uint32_t tokens = std::min(budget, headway::sdk::remaining_tokens(s.running[i]));
      plan.add_slice(s.running[i], tokens);
      budget -= tokens;
    }
    for (uint32_t i = 0; i < s.waiting_count && s.running_count + i < 16 && budget > 0; ++i) {
      const uint32_t tokens = std::min(budget, headway::sdk::remaining_tokens(s.waiting[i]));
      plan.add_slice(s.waiting[i], tokens);
      budget -= tokens;
    }
  }

 private:
  uint64_t limit_;
  uint64_t preempted_ = 0;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(LivelockingScheduler, "org.headway.test.livelocking", "test_livelocking",
                         "0.0.1", "Test only: preempts the request it just admitted, for ever",
                         kOptions)
