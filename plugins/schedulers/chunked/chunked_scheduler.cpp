// The baseline step scheduler, with the semantics of vLLM's V1 scheduler: a per-step token budget
// and a cap on running requests; running requests first in admission order (a decode takes one
// token, a partial prefill continues), then waiting requests first come first served; a per-request
// per-step cap (long_prefill_token_threshold); a waiting prompt that does not fit the budget gets a
// chunk of what is left. When KV blocks run out, the most recently admitted running request is
// preempted (and recomputed later); no waiting request is admitted in a step that preempted.
// Unlike V1, a preempted request is readmitted only when its whole recompute fits, with a block
// of growth for each running request (sdk::may_readmit): V1 readmits it on its first chunk, and a
// long one then preempts itself at a later chunk and recomputes from nothing, over and over.
//
// With a small budget relative to a long prompt this reproduces head-of-line blocking: that is the
// point of having it, as the yardstick every other policy is measured against.
#include <algorithm>
#include <headway/plugin.hpp>
#include <string>
#include <vector>

namespace {

using headway::sdk::blocks_freed_by_preempting;
using headway::sdk::extra_blocks;
using headway::sdk::may_readmit;
using headway::sdk::remaining_tokens;

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("max_num_batched_tokens", 8192, 1, 1 << 24,
                             "Token budget of one step, all slices together."),
    headway::sdk::int_option("max_num_seqs", 256, 1, 1 << 16,
                             "Requests holding KV (running) at once."),
    headway::sdk::int_option("long_prefill_token_threshold", 0, 0, 1 << 24,
                             "Most tokens one request may compute in one step; 0 = no cap."),
};

class ChunkedScheduler final : public headway::sdk::StepScheduler {
 public:
  ChunkedScheduler(const headway::sdk::Host& host, const headway::sdk::Options& options,
                   const hw_engine_facts&)
      : budget_(static_cast<uint32_t>(options.get_int("max_num_batched_tokens"))),
        max_num_seqs_(static_cast<uint32_t>(options.get_int("max_num_seqs"))),
        threshold_(static_cast<uint32_t>(options.get_int("long_prefill_token_threshold"))) {
    headway::sdk::warn_if_budget_below_max_num_seqs(host, "chunked", budget_, max_num_seqs_);
  }

  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), budget_, max_num_seqs_};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    uint32_t budget = budget_;
    uint32_t free_blocks = s.kv_blocks_free;
    uint32_t running_end = s.running_count;  // requests past it were preempted this step
    bool preempted_any = false;

    for (uint32_t i = 0; i < running_end && budget > 0; ++i) {
      const hw_request_view& r = s.running[i];
      uint32_t tokens = std::min(cap(remaining_tokens(r)), budget);
      if (tokens == 0) continue;
      uint32_t need = extra_blocks(r, tokens, s.block_size);
      bool self_preempted = false;
      while (need > free_blocks) {
        // Preempt the most recently admitted request not yet scheduled this step (the tail).
        const hw_request_view& victim = s.running[running_end - 1];
        plan.preempt(victim.id);
        preempted_any = true;
        free_blocks += blocks_freed_by_preempting(victim);
        --running_end;
        if (running_end == i) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) break;
      plan.add_slice(r, tokens);
      budget -= tokens;
      free_blocks -= need;
    }
    if (preempted_any) return;

    // FCFS: nobody overtakes a request that does not fit, except one that takes no free block
    // (its KV moved here with blocks for all of it): it cannot delay the other, and the blocks it
    // holds may be what the other waits for (with nothing running, the engine would stall).
    uint32_t running_after = running_end;
    bool blocked = false;
    for (uint32_t i = 0; i < s.waiting_count && budget > 0; ++i) {
      if (running_after >= max_num_seqs_) break;
      const hw_request_view& w = s.waiting[i];
      // Only a request holding blocks can pass a blocked one, and the engine queues those at the
      // head (moved KV at the very head, Engine::complete_transfer; a preempted request after
      // them; new ones at the tail): the walk ends at the first one holding none.
      if (blocked && w.blocks_held == 0) break;
      uint32_t tokens = std::min(cap(remaining_tokens(w)), budget);
      uint32_t need = extra_blocks(w, tokens, s.block_size);
      if (blocked && need > 0) continue;
      if (need > free_blocks || !may_readmit(w, free_blocks, running_after, s.block_size)) {
        blocked = true;
        continue;
      }
      plan.add_slice(w, tokens);
      budget -= tokens;
      free_blocks -= need;
      ++running_after;
    }
  }

 private:
  uint32_t cap(uint32_t tokens) const {
    return threshold_ > 0 ? std::min(tokens, threshold_) : tokens;
  }

  uint32_t budget_;
  uint32_t max_num_seqs_;
  uint32_t threshold_;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(ChunkedScheduler, "org.headway.scheduler.chunked", "chunked", "0.1.0",
                         "Baseline chunked-prefill scheduler (vLLM V1 semantics)", kOptions)
