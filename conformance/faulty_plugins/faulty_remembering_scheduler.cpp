// Faulty on purpose: the SDK template's FCFS scheduler (sdk/templates/step_scheduler) that also
// remembers when it first saw each request, to age waiting ones, and never forgets a request that
// left. The ABI has no "finished" call: a request that finished or was aborted just stops appearing
// in the snapshot, and this plugin's map keeps its entry forever, so its memory grows with every
// request served. The suite must report scheduler.per_request_heap as FAIL.
//
// With `forget_finished = true` it drops the ids that left the snapshot, as a correct plugin does
// (the pattern for per-request state): the same test must then PASS.
#include <cstdint>
#include <headway/plugin.hpp>
#include <unordered_map>

#include "template_fcfs.h"

namespace {

constexpr hw_option_spec kOptions[] = {
    headway::sdk::bool_option("forget_finished", false,
                              "Drop the state of requests that left the snapshot (the fix)."),
};

class RememberingScheduler final : public headway::sdk::StepScheduler {
 public:
  static constexpr uint32_t kBudget = 4096;
  static constexpr uint32_t kMaxSeqs = 128;

  RememberingScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                       const hw_engine_facts&)
      : forget_finished_(options.get_bool("forget_finished")) {}
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    for (uint32_t i = 0; i < s.running_count; ++i) remember(s.running[i], s.step_index);
    for (uint32_t i = 0; i < s.waiting_count; ++i) remember(s.waiting[i], s.step_index);
    if (forget_finished_) {
      std::erase_if(seen_,
                    [&](const auto& entry) { return entry.second.last_step != s.step_index; });
    }
    headway::faulty::plan_template_fcfs(s, plan, kBudget, kMaxSeqs);
  }

 private:
  struct Seen {
    double first_seen;
    uint64_t last_step;
  };
  void remember(const hw_request_view& r, uint64_t step) {
    seen_.try_emplace(r.id, Seen{r.arrival_time, step}).first->second.last_step = step;
  }

  bool forget_finished_;
  std::unordered_map<uint64_t, Seen> seen_;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(RememberingScheduler, "org.headway.faulty.remembering",
                         "faulty_remembering", "0.0.1",
                         "Faulty on purpose: keeps state for every request it has ever seen",
                         kOptions)
