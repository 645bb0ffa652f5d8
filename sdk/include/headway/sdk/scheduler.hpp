// Writing a step scheduler as a C++ class. Header-only; plugin side.
//
//   class MyScheduler : public headway::sdk::StepScheduler {
//    public:
//     MyScheduler(const Host&, const Options&, const hw_engine_facts&);
//     hw_scheduler_limits limits() const override;
//     void schedule(const hw_scheduler_snapshot&, PlanWriter&) override;
//   };
//   HEADWAY_EXPORT_SCHEDULER(MyScheduler, "com.example.mine", "mine", "1.0.0", "…", kOptions)
//
// Lifetimes: the Host may be kept, by reference or by copy (it lives as long as the instance); the
// Options are valid only during the constructor: read every option there.
// Threading: the engine calls one instance from one thread at a time, not always the same thread
// (create, get_limits, schedule and destroy may each come from another), so keep no thread_local
// state. Instances of one library run concurrently in other engines: guard any static state.
#pragma once

#include <headway/abi.h>

#include <cstdint>
#include <headway/sdk/host.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <string>

namespace headway::sdk {

// KV blocks needed to hold `tokens` positions.
constexpr uint32_t blocks_for_tokens(uint64_t tokens, uint32_t block_size) {
  return static_cast<uint32_t>((tokens + block_size - 1) / block_size);
}

// Extra blocks a request needs to compute `tokens` more positions.
constexpr uint32_t extra_blocks(const hw_request_view& r, uint32_t tokens, uint32_t block_size) {
  uint32_t need = blocks_for_tokens(static_cast<uint64_t>(r.computed_tokens) + tokens, block_size);
  return need > r.blocks_held ? need - r.blocks_held : 0;
}

// KV blocks that preempting a running request gives back: those no other request holds too.
constexpr uint32_t blocks_freed_by_preempting(const hw_request_view& r) {
  return r.blocks_held - r.blocks_shared;
}

// Tokens a request can compute now (prompt or recompute left; 1 for a decode).
constexpr uint32_t remaining_tokens(const hw_request_view& r) {
  return r.total_tokens - r.computed_tokens;
}

// Whether a waiting request may be admitted with `free_blocks` free while `running` requests go
// on beside it. A request never preempted may (its first chunk's blocks are the caller's check).
// A preempted one may only when the free blocks hold its whole recompute (prompt and outputs so
// far) and a block of growth for each running request: admitted on its first chunk alone, a long
// context finds no block for a later chunk, preempts itself (the newest running request) and
// starts again from nothing, over and over until something else finishes. On a simulated decode
// engine with moved_kv_blocks = "as_needed", that cycle recomputed 13.1M tokens, 99% of them
// thrown away: the eight recomputes that finished needed about 128k (docs/performance.md).
constexpr bool may_readmit(const hw_request_view& r, uint32_t free_blocks, uint32_t running,
                           uint32_t block_size) {
  if (r.preemptions == 0) return true;
  return uint64_t{extra_blocks(r, remaining_tokens(r), block_size)} + running <= free_blocks;
}

// Logs the warning of an option set against another so that it does nothing, or holds requests
// back: "<scheduler>: <option> (<value>) <relation> <other> (<other_value>): <consequence>".
inline void warn_of_option(const Host& host, const std::string& scheduler,
                           const std::string& option, uint64_t value, const std::string& relation,
                           const std::string& other, uint64_t other_value,
                           const std::string& consequence) {
  host.log(HW_LOG_WARN, scheduler + ": " + option + " (" + std::to_string(value) + ") " + relation +
                            " " + other + " (" + std::to_string(other_value) + "): " + consequence);
}

// Logs a warning from `scheduler` when its step budget is below max_num_seqs: a step then serves
// at most `budget` requests, and a decode past them waits for those before it to finish. vLLM
// refuses it; warned about, not refused, since the conformance suite's tiny_budget traces run
// budgets of 1-48 tokens with max_num_seqs at its default.
inline void warn_if_budget_below_max_num_seqs(const Host& host, const std::string& scheduler,
                                              uint32_t budget, uint32_t max_num_seqs) {
  if (budget >= max_num_seqs) return;
  warn_of_option(host, scheduler, "max_num_batched_tokens", budget, "<", "max_num_seqs",
                 max_num_seqs,
                 "a step serves at most that many requests, and a decode past them waits for "
                 "those before it to finish; set max_num_batched_tokens to max_num_seqs or more");
}

// Appends to the engine-owned plan arrays; throws rather than overflow them.
class PlanWriter {
 public:
  explicit PlanWriter(hw_scheduler_plan* plan) : plan_(plan) {
    plan_->slice_count = 0;
    plan_->preempted_count = 0;
  }
  void add_slice(const hw_request_view& r, uint32_t tokens) {
    if (plan_->slice_count >= plan_->slice_capacity) {
      // The capacity is one slice per request the snapshot holds: one more means a request was
      // scheduled twice, or one the snapshot does not hold (finished, unknown) was added.
      throw Error(HW_INTERNAL, "plan has more slices than the snapshot has requests (request " +
                                   std::to_string(r.id) + " is slice #" +
                                   std::to_string(plan_->slice_count) +
                                   "): is a request scheduled twice, or one not in the snapshot?");
    }
    plan_->slices[plan_->slice_count++] = hw_slice{r.id, r.computed_tokens, tokens};
  }
  void preempt(uint64_t request_id) {
    if (plan_->preempted_count >= plan_->preempted_capacity) {
      throw Error(HW_INTERNAL, "plan preempts more requests than are running (request " +
                                   std::to_string(request_id) +
                                   "): is a request preempted twice, or one not running?");
    }
    plan_->preempted[plan_->preempted_count++] = request_id;
  }
  uint32_t slice_count() const { return plan_->slice_count; }

 private:
  hw_scheduler_plan* plan_;
};

class StepScheduler {
 public:
  virtual ~StepScheduler() = default;
  virtual hw_scheduler_limits limits() const = 0;
  virtual void schedule(const hw_scheduler_snapshot& snapshot, PlanWriter& plan) = 0;
};

// Generates the C table for a StepScheduler subclass T constructible from
// (const Host&, const Options&, const hw_engine_facts&).
template <class T>
struct SchedulerAdapter {
  static constexpr int32_t kind = HW_KIND_STEP_SCHEDULER;

  static StepScheduler* self(hw_scheduler* s) { return &reinterpret_cast<WithHost<T>*>(s)->object; }

  static int32_t create(const hw_host_services* host, const hw_options* options,
                        const hw_engine_facts* facts, hw_scheduler** out, hw_status* status) {
    return guarded(status, [&] {
      *out = reinterpret_cast<hw_scheduler*>(new WithHost<T>(host, Options(options), *facts));
    });
  }
  static void destroy(hw_scheduler* s) { delete reinterpret_cast<WithHost<T>*>(s); }
  static int32_t get_limits(hw_scheduler* s, hw_scheduler_limits* limits, hw_status* status) {
    return guarded(status, [&] {
      *limits = self(s)->limits();
      limits->struct_size = sizeof(hw_scheduler_limits);
    });
  }
  static int32_t schedule(hw_scheduler* s, const hw_scheduler_snapshot* snapshot,
                          hw_scheduler_plan* plan, hw_status* status) {
    return guarded(status, [&] {
      PlanWriter writer(plan);
      self(s)->schedule(*snapshot, writer);
    });
  }
  static constexpr hw_scheduler_table table = {sizeof(hw_scheduler_table), &create, &destroy,
                                               &get_limits, &schedule};
};

}  // namespace headway::sdk
