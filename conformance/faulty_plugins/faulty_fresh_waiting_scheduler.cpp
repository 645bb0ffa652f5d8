// Faulty on purpose: the SDK template's FCFS scheduler (sdk/templates/step_scheduler), except that
// it takes every waiting request to have nothing computed and plans all its tokens, as a plugin
// written before prefix caching and disaggregation might: right for a new or preempted request,
// over what is left for one whose prompt beginning was found in the prefix cache or whose KV was
// moved to this decode engine. The suite must report scheduler.plans_valid as FAIL.
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

uint32_t all_tokens(const hw_request_view& r) { return r.total_tokens; }

class FreshWaitingScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 4096;
  static constexpr uint32_t kMaxSeqs = 128;

  FreshWaitingScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                        const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }
  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    headway::faulty::plan_template_fcfs(s, plan, kBudget, kMaxSeqs, all_tokens);
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(FreshWaitingScheduler, "org.headway.faulty.fresh_waiting",
                         "faulty_fresh_waiting", "0.0.1",
                         "Faulty on purpose: plans a waiting request's tokens from zero",
                         headway::sdk::no_options)
