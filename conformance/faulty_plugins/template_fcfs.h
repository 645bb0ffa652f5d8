// The SDK template's first-come-first-served plan (sdk/templates/step_scheduler), for the faulty
// schedulers that are "the template plus one fault": running requests first, preempting from the
// back when blocks run out, then waiting ones, each chunked to what is left of the budget.
// Threading: a pure function of its arguments.
#pragma once

#include <algorithm>
#include <headway/plugin.hpp>

namespace headway::faulty {

// `waiting_left`: the tokens a waiting request has left to compute (a fault may count them
// wrongly).
inline void plan_template_fcfs(
    const hw_scheduler_snapshot& s, sdk::PlanWriter& plan, uint32_t budget, uint32_t max_seqs,
    uint32_t (*waiting_left)(const hw_request_view&) = sdk::remaining_tokens) {
  using sdk::extra_blocks;
  using sdk::remaining_tokens;
  uint32_t free_blocks = s.kv_blocks_free;
  uint32_t end = s.running_count;  // running requests from `end` on are preempted this step
  for (uint32_t i = 0; i < end && budget > 0; ++i) {
    const hw_request_view& r = s.running[i];
    const uint32_t tokens = std::min(remaining_tokens(r), budget);
    const uint32_t need = extra_blocks(r, tokens, s.block_size);
    while (need > free_blocks && end > i + 1) {
      --end;
      plan.preempt(s.running[end].id);
      free_blocks += sdk::blocks_freed_by_preempting(s.running[end]);
    }
    if (need > free_blocks) return;
    plan.add_slice(r, tokens);
    budget -= tokens;
    free_blocks -= need;
  }
  if (end < s.running_count) return;
  uint32_t running = s.running_count;
  for (uint32_t i = 0; i < s.waiting_count && running < max_seqs && budget > 0; ++i) {
    const hw_request_view& w = s.waiting[i];
    const uint32_t tokens = std::min(waiting_left(w), budget);
    const uint32_t need = extra_blocks(w, tokens, s.block_size);
    if (need > free_blocks) break;
    plan.add_slice(w, tokens);
    budget -= tokens;
    free_blocks -= need;
    ++running;
  }
}

// The options of the faulty schedulers that take the operator's limits, as the template's do.
inline constexpr hw_option_spec kLimitOptions[] = {
    sdk::int_option("max_num_batched_tokens", 4096, 1, 1 << 24, "Tokens per step."),
    sdk::int_option("max_num_seqs", 128, 1, 1 << 16, "Requests running at once."),
};

// The template's scheduler with kLimitOptions, declaring them as its limits; a faulty one changes
// the limits it keeps, the budget a step plans with, or the plan. Threading: abi.h's (one thread
// at a time per instance).
class TemplateScheduler : public sdk::StepScheduler {
 public:
  explicit TemplateScheduler(const sdk::Options& options)
      : budget_(static_cast<uint32_t>(options.get_int("max_num_batched_tokens"))),
        max_seqs_(static_cast<uint32_t>(options.get_int("max_num_seqs"))) {}
  hw_scheduler_limits limits() const override {
    return {sizeof(hw_scheduler_limits), budget_, max_seqs_};
  }
  void schedule(const hw_scheduler_snapshot& s, sdk::PlanWriter& plan) override {
    plan_template_fcfs(s, plan, step_budget(), max_seqs_);
  }

 protected:
  virtual uint32_t step_budget() const { return budget_; }
  uint32_t budget_;
  uint32_t max_seqs_;
};

}  // namespace headway::faulty
