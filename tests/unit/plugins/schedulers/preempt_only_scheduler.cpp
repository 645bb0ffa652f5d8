// A test-only step scheduler whose every third step preempts the last running request and plans
// nothing else (as the chunked scheduler does when a lone running request cannot grow); the other
// steps run every request's next token, or its whole prompt. The engine must take a step with no
// forward pass: its clock does not move, and no model duration is read. It counts those steps
// through the host services ("preempt_only_steps"), which serve exports under the engine's labels.
#include <headway/plugin.hpp>

namespace {

class PreemptOnlyScheduler final : public headway::sdk::StepScheduler {
 public:
  PreemptOnlyScheduler(const headway::sdk::Host& host, const headway::sdk::Options&,
                       const hw_engine_facts&)
      : host_(host) {}

  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 4096, 16};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    if (++calls_ % 3 == 0 && s.running_count > 0) {
      plan.preempt(s.running[s.running_count - 1].id);
      host_.counter_add("preempt_only_steps", 1.0);
      return;
    }
    for (uint32_t i = 0; i < s.running_count; ++i) {
      plan.add_slice(s.running[i], headway::sdk::remaining_tokens(s.running[i]));
    }
    for (uint32_t i = 0; i < s.waiting_count && s.running_count + i < 16; ++i) {
      plan.add_slice(s.waiting[i], headway::sdk::remaining_tokens(s.waiting[i]));
    }
  }

 private:
  headway::sdk::Host host_;
  uint64_t calls_ = 0;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(PreemptOnlyScheduler, "org.headway.test.preempt_only", "test_preempt_only",
                         "0.0.1", "Test only: every third step preempts and plans nothing else",
                         headway::sdk::no_options)
