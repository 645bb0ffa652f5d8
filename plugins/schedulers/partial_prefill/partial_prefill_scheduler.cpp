// Concurrent partial prefills with limits: the semantics of vLLM V0's chunked-prefill scheduler
// with max_num_partial_prefills (P), max_long_partial_prefills (L) and long_prefill_token_threshold
// (T) (vllm/core/scheduler.py, PartialPrefillMetadata), which vLLM V1 dropped.
//
// "Remaining" is what a request still has to compute (total - computed); it shrinks every step, so
// a long prompt counts as short near its end. A prefill is long when remaining > T.
//
// One step, P > 1:
// 1. Count the prefills: running requests mid-prefill (and how many of them are long), then the
//    waiting prompts that step 3 will admit, in queue order while fewer than P are counted,
//    skipping a long waiting prompt when the long ones counted would exceed L, and stopping at
//    max_num_seqs and at the first prompt whose KV does not fit (a request with one token left,
//    holding moved KV or cached to its last token, is a decode: admitted, not counted). schedulable
//    = min(count, P); each prefill may take at most budget / schedulable tokens this step (the
//    whole budget when nothing is counted). P divides the budget; it does not cap how many prefills
//    share a step. V0 counts every waiting prompt up to P, admissible or not, and the share of one
//    that stays waiting goes unused (with max_num_seqs = 1 and P = 4, a lone prompt prefilled a
//    quarter of the budget per step); here the budget goes to the prefills that run. With
//    max_long_prefill_chunk (C) set, a prefill of a long prompt (more than T tokens in all, prompt
//    and recomputed outputs) takes at most C tokens of its share, to its last chunk: this is not in
//    V0, whose long prompt, alone, took the whole budget in every step it was in.
// 2. Running requests: decodes first, then prefills (each group in admission order; with
//    policy = priority, by (priority, arrival) within each group). A decode takes 1 token, a
//    prefill min(remaining, budget left, share[, C when its prompt is long]). With P > 1, a token
//    for each waiting request holding moved KV that step 1 found admissible is kept from the
//    running prefills (not from the running decodes): those are decodes too, and step 3 admits
//    them first. A request that gets 0 tokens ends this phase. When KV blocks run out, the last
//    request of that order (fcfs) or the lowest-priority running request (priority: highest
//    priority value, then latest arrival, as vLLM V1 picks it) is preempted, possibly the request
//    itself; one already served this step gives back its slice, its budget and its blocks (so a
//    less urgent decode, served first, makes room for a more urgent prefill).
// 3. No preemption this step: waiting requests in queue order (priority: those holding moved KV
//    first, then by priority, then arrival). A long one is deferred, keeping its place, while L
//    long prefills are in progress (counting the ones admitted this step); others are admitted
//    with min(remaining, budget left, share[, C when its prompt is long]). Admission stops at the
//    budget, at max_num_seqs, or at a request whose chunk does not fit in the free KV blocks
//    (nobody overtakes it). With P > 1, as in V0 (which allocated a prompt's blocks at
//    admission), a prompt is admitted only when blocks for all of it fit in what the prefills in
//    progress will not claim; otherwise concurrent prefills run the cache dry mid-prompt and long
//    prompts are preempted and recomputed over and over (measured on the configs/hol comparison
//    when it was written: 2,214 preemptions without this rule, none with it; 3 since later
//    changes, docs/performance.md). It does not keep room for the decodes' growth: on a cache
//    that is small for the load, their outputs take the blocks left free and the prefill served
//    last is preempted, as in V0 and V1 (helper-170: 232 preemptions on a 4,096-token cache where
//    `chunked` made 1,577).
//
// P = 1 is, by the requirement, exactly the baseline `chunked` scheduler (vLLM V1, with
// chunked's readmission of a preempted request only when its whole recompute fits), so that
// a deployment switching schedulers without setting P sees no change. Two points differ from V0
// there, deliberately: running requests are served in admission order (V0 served decodes first for
// every P), and a non-zero T caps every request's chunk per step (V1's meaning of T; in V0, T only
// classifies prompts as long). With P > 1, T only classifies, as in V0, and C (0 by default: V0
// exactly) caps every chunk of a long prompt. Why C: every running request waits for each step, and
// a step carrying a long prompt's full-budget chunk deep in its context is the longest there is.
// partial_prefill admits short prompts during a long prefill (that is its point), so more streams
// are decoding through those steps than under the baseline, which queues them: on the configs/hol
// simulation that made its p99 inter-token latency 1.17x the baseline's; C = 2048 makes it 0.74x
// (docs/performance.md). C caps a long prompt's chunks to its last, not only while more than T
// tokens are left: its last T tokens are the deepest in the context, so their chunks make the
// slowest steps of all (uncapped, one took the whole budget at a 120k context).
//
// Hot path: the per-step scratch (index vectors) is reserved in the constructor from max_num_seqs
// and grows only when a queue reaches a new size; nothing is logged per step. The priority policy
// orders both queues by a counting sort over their few distinct priorities (queue_groups.h), and
// materialises only the head of the waiting order that a step reaches; a comparison sort remains
// for queues where that does not apply (more than 64 distinct priorities, or arrivals out of queue
// order within a priority).
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <headway/plugin.hpp>
#include <string>
#include <vector>

#include "queue_groups.h"

namespace {

using headway::scheduler::QueueGroups;
using headway::sdk::blocks_freed_by_preempting;
using headway::sdk::extra_blocks;
using headway::sdk::may_readmit;
using headway::sdk::remaining_tokens;

constexpr hw_str kPolicies[] = {headway::sdk::make_str("fcfs"), headway::sdk::make_str("priority")};

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("max_num_batched_tokens", 8192, 1, 1 << 24,
                             "Token budget of one step, all slices together."),
    headway::sdk::int_option("max_num_seqs", 256, 1, 1 << 16,
                             "Requests holding KV (running) at once."),
    headway::sdk::int_option(
        "max_num_partial_prefills", 1, 1, 1 << 16,
        "P: prefills the step budget is divided among (each takes at most "
        "budget / min(prefills counted, P) tokens, at least 1; counted: the running "
        "prefills and the waiting prompts the step admits). 1 = the baseline "
        "chunked scheduler, exactly."),
    headway::sdk::int_option("max_long_partial_prefills", 1, 1, 1 << 16,
                             "L: long prefills (more than T tokens left) in progress at once; "
                             "a long waiting prompt is deferred while L are. Must be <= "
                             "max_num_partial_prefills."),
    headway::sdk::int_option("long_prefill_token_threshold", 0, 0, 1 << 24,
                             "T: a prefill with more than T tokens left is long. With "
                             "max_num_partial_prefills > 1, 0 means 4% of the engine's "
                             "max_model_len. With max_num_partial_prefills = 1 it is, as in "
                             "`chunked`, the most tokens one request may compute in one step "
                             "(0 = no cap)."),
    headway::sdk::int_option(
        "max_long_prefill_chunk", 0, 0, 1 << 24,
        "C: with max_num_partial_prefills > 1, the most tokens a prefill of a "
        "long prompt (more than T tokens in all) computes in one step, to its "
        "last chunk; 0 = no cap beyond its share of the budget (vLLM V0). "
        "Shorter chunks shorten the steps a long prompt is in, which every "
        "decoding request waits for. The cost: "
        "budget the cap leaves may go unused, and a long prompt holds one of "
        "the L long slots for about (length - T) / C steps while later long "
        "prompts wait. A C of max_num_batched_tokens or more does nothing (a warning "
        "says so at start-up)."),
    headway::sdk::enum_option("policy", "fcfs", kPolicies,
                              "Queue order: fcfs (arrival), or priority (lower value first, then "
                              "arrival). Priority is strict: with max_num_partial_prefills > 1, a "
                              "more urgent prompt waiting for KV for all of it holds back the "
                              "rest (docs/conformance.md)."),
};

class PartialPrefillScheduler final : public headway::sdk::StepScheduler {
 public:
  PartialPrefillScheduler(const headway::sdk::Host& host, const headway::sdk::Options& options,
                          const hw_engine_facts& facts)
      : budget_(static_cast<uint32_t>(options.get_int("max_num_batched_tokens"))),
        max_num_seqs_(static_cast<uint32_t>(options.get_int("max_num_seqs"))),
        max_partial_(static_cast<uint32_t>(options.get_int("max_num_partial_prefills"))),
        max_long_(static_cast<uint32_t>(options.get_int("max_long_partial_prefills"))),
        threshold_(static_cast<uint32_t>(options.get_int("long_prefill_token_threshold"))),
        long_chunk_(static_cast<uint32_t>(options.get_int("max_long_prefill_chunk"))),
        priority_(options.get_string("policy") == "priority") {
    if (max_long_ > max_partial_) {
      throw headway::sdk::Error(HW_INVALID_ARGUMENT, "max_long_partial_prefills (" +
                                                         std::to_string(max_long_) +
                                                         ") must be <= max_num_partial_prefills (" +
                                                         std::to_string(max_partial_) + ")");
    }
    if (max_partial_ == 1 && long_chunk_ > 0) {
      throw headway::sdk::Error(
          HW_INVALID_ARGUMENT,
          "max_long_prefill_chunk (" + std::to_string(long_chunk_) +
              ") needs max_num_partial_prefills > 1; with max_num_partial_prefills = 1, "
              "long_prefill_token_threshold caps the chunk of every request");
    }
    if (long_chunk_ >= budget_) {
      // Harmless, so not refused, but inert: every chunk already fits in the budget.
      headway::sdk::warn_of_option(host, "partial_prefill", "max_long_prefill_chunk", long_chunk_,
                                   ">=", "max_num_batched_tokens", budget_,
                                   "it never caps a chunk; set it below the budget or to 0");
    }
    if (max_partial_ > budget_) {
      // Each prefill's share, budget / P, is taken as at least 1 token (it was 0, and a prefill
      // given 0 tokens never progresses): at most `budget` prefills progress in one step. Not
      // refused: the conformance suite, and an operator shrinking the budget, meet it.
      headway::sdk::warn_of_option(host, "partial_prefill", "max_num_partial_prefills",
                                   max_partial_, ">", "max_num_batched_tokens", budget_,
                                   "at most that many prefills progress in one step, one token "
                                   "each; set max_num_partial_prefills to the budget or less");
    }
    if (max_partial_ > max_num_seqs_) {
      // At most max_num_seqs requests run, so no more prefills than that ever share the budget.
      headway::sdk::warn_of_option(host, "partial_prefill", "max_num_partial_prefills",
                                   max_partial_, ">", "max_num_seqs", max_num_seqs_,
                                   "at most that many prefills share the budget; set "
                                   "max_num_partial_prefills to max_num_seqs or less");
    }
    headway::sdk::warn_if_budget_below_max_num_seqs(host, "partial_prefill", budget_,
                                                    max_num_seqs_);
    if (max_partial_ > 1 && facts.max_model_len > 0 && threshold_ > facts.max_model_len) {
      // No prompt can be long, so max_long_partial_prefills does nothing (vLLM's SchedulerConfig
      // refuses it; warned about here, as the inert max_long_prefill_chunk above is).
      host.log(HW_LOG_WARN, "partial_prefill: long_prefill_token_threshold (" +
                                std::to_string(threshold_) + ") > the engine's max_model_len (" +
                                std::to_string(facts.max_model_len) +
                                "): no prompt counts as long, so max_long_partial_prefills "
                                "limits nothing");
    }
    if (max_partial_ > 1 && threshold_ == 0) {
      threshold_ = static_cast<uint32_t>(static_cast<uint64_t>(facts.max_model_len) * 4 / 100);
    }
    // The running queue never exceeds max_num_seqs; the waiting order is only needed by priority
    // and grows with the waiting queue's largest size.
    running_order_.reserve(max_num_seqs_);
    prefill_order_.reserve(max_num_seqs_);
    served_tokens_.reserve(max_num_seqs_);
    served_blocks_.reserve(max_num_seqs_);
    if (priority_) {
      waiting_order_.reserve(max_num_seqs_);
      running_group_.reserve(max_num_seqs_);
    }
  }

  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), budget_, max_num_seqs_};
  }

  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    const bool partial = max_partial_ > 1;
    uint32_t prefills = 0;       // running requests mid-prefill
    uint32_t long_prefills = 0;  // of which long; then grows with each long one admitted
    order_running(s, partial, prefills, long_prefills);
    if (priority_) start_waiting_order(s);

    // 1. Prefills counted at the start of the step (V0's PartialPrefillMetadata.from_queues, but
    //    of the waiting prompts only those step 3 can admit: see count_admissible_prefills).
    uint32_t share = budget_;  // P = 1: budget / min(count, 1) is the whole budget either way
    uint64_t reserved = 0;  // blocks the running prefills will claim, this step's chunks included
    uint32_t running_decodes = 0;
    uint32_t waiting_decodes = 0;  // waiting requests holding moved KV that step 3 will admit
    if (partial) {
      uint64_t decode_blocks = 0;  // blocks the decodes, served first, take this step
      for (uint32_t index : running_order_) {
        const hw_request_view& r = s.running[index];
        if (is_prefill(r)) {
          reserved += whole_prompt_blocks(r, s.block_size);
        } else {
          ++running_decodes;
          decode_blocks += extra_blocks(r, 1, s.block_size);
        }
      }
      prefills = count_admissible_prefills(s, prefills, long_prefills, reserved + decode_blocks,
                                           waiting_decodes);
      const uint32_t schedulable = std::min(prefills, max_partial_);
      if (schedulable > 0) share = std::max(1u, budget_ / schedulable);  // 0 would stall them
    }

    // 2. Running requests. The first `i` of running_order_ are served. Only the priority policy
    // with P > 1 may yet preempt one of them (victim()); then their tokens and blocks wait in
    // served_tokens_ and served_blocks_ and their slices are written when the phase ends,
    // otherwise at once (no per-step cost for the others).
    // With P > 1 decodes go first, after the running ones the waiting ones holding moved KV: their
    // token each is kept from the running prefills, and given back to step 3, which admits them
    // first.
    const uint32_t held_back =
        std::min(waiting_decodes, budget_ - std::min(budget_, running_decodes));
    uint32_t budget = budget_ - held_back;
    uint32_t free_blocks = s.kv_blocks_free;
    uint64_t prefill_blocks_now = 0;  // blocks this step's running prefill chunks take
    bool preempted_any = false;
    // fcfs preempts the tail, and with P = 1 the tail is the lowest priority: never one served.
    const bool may_take_back = priority_ && partial;
    served_tokens_.clear();
    served_blocks_.clear();
    size_t i = 0;
    while (i < running_order_.size()) {
      const hw_request_view& r = s.running[running_order_[i]];
      const uint32_t tokens = std::min(cap(r, partial, share), budget);
      if (tokens == 0) break;  // budget used up
      const uint32_t need = extra_blocks(r, tokens, s.block_size);
      bool self_preempted = false;
      while (need > free_blocks) {
        const size_t v = victim(s, may_take_back ? 0 : i);
        const hw_request_view& victim_request = s.running[running_order_[v]];
        plan.preempt(victim_request.id);
        preempted_any = true;
        free_blocks += blocks_freed_by_preempting(victim_request);
        // erase keeps the order of the others and never allocates.
        running_order_.erase(running_order_.begin() + static_cast<std::ptrdiff_t>(v));
        if (v < i) {  // served already: what it took this step comes back
          budget += served_tokens_[v];
          free_blocks += served_blocks_[v];
          if (partial && is_prefill(victim_request)) prefill_blocks_now -= served_blocks_[v];
          served_tokens_.erase(served_tokens_.begin() + static_cast<std::ptrdiff_t>(v));
          served_blocks_.erase(served_blocks_.begin() + static_cast<std::ptrdiff_t>(v));
          --i;  // r is at i now
        } else if (v == i) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) continue;  // i now names the next request, if any
      if (may_take_back) {
        served_tokens_.push_back(tokens);
        served_blocks_.push_back(need);
      } else {
        plan.add_slice(r, tokens);
      }
      budget -= tokens;
      free_blocks -= need;
      if (partial && is_prefill(r)) prefill_blocks_now += need;
      ++i;
    }
    for (size_t k = 0; may_take_back && k < i; ++k) {
      plan.add_slice(s.running[running_order_[k]], served_tokens_[k]);
    }
    if (preempted_any) return;  // a step that preempted admits nobody
    budget += held_back;

    // With P > 1, as in V0, a prompt is admitted only when the KV blocks for all of it are free,
    // counting what the prefills in progress will still claim. Several prompts prefill at once
    // here; admitting on the first chunk alone would let them run the cache dry mid-prefill and
    // preempt (and recompute) long prompts over and over.
    // (No preemption, so running_order_ still holds the requests `reserved` was counted over.)
    reserved -= std::min<uint64_t>(reserved, prefill_blocks_now);

    // 3. Waiting requests. Nobody overtakes a request that does not fit, except one that takes
    // no free block now or later (its KV moved here with the blocks of its whole length): it
    // cannot delay the other's admission, and the blocks it holds may be what the other waits
    // for (with nothing running, a head waiting on them stalled the engine for ever). For the
    // same reasons such a request passes whatever the prefills in progress reserve.
    uint32_t running_after = s.running_count;
    bool blocked = false;
    for (uint32_t k = 0; k < s.waiting_count && budget > 0; ++k) {
      if (running_after >= max_num_seqs_) break;
      const hw_request_view& w = waiting_at(s, k);
      // Only a request holding blocks can pass a blocked one (below), and those stand before all
      // others: the priority order puts them first, and so does the engine's queue (moved KV is
      // queued at its head, Engine::complete_transfer; a preempted request after it, new ones at
      // the tail). So the walk ends at the first one holding none.
      if (blocked && w.blocks_held == 0) break;
      const bool is_long = remaining_tokens(w) > threshold_;
      if (partial && is_long && long_prefills >= max_long_) continue;  // deferred, keeps its place
      const uint32_t tokens = std::min(cap(w, partial, share), budget);
      const uint32_t need = extra_blocks(w, tokens, s.block_size);
      // `whole` includes this chunk's `need`; what stays reserved is the rest of the prompt.
      const uint64_t whole = partial ? whole_prompt_blocks(w, s.block_size) : need;
      if (blocked && whole > 0) continue;  // whole >= need: it takes free blocks now or later
      // With P = 1, `chunked`'s rule for a preempted request; with P > 1 `whole` already holds
      // its whole recompute.
      if (need > free_blocks || (whole > 0 && whole + reserved > free_blocks) ||
          (!partial && !may_readmit(w, free_blocks, running_after, s.block_size))) {
        blocked = true;
        continue;
      }
      reserved += whole - need;
      plan.add_slice(w, tokens);
      budget -= tokens;
      free_blocks -= need;
      ++running_after;
      if (partial && is_long) ++long_prefills;
    }
  }

 private:
  // Blocks a prefill still needs to hold its whole prompt (and recomputed outputs).
  static uint64_t whole_prompt_blocks(const hw_request_view& r, uint32_t block_size) {
    const uint64_t need = (static_cast<uint64_t>(r.total_tokens) + block_size - 1) / block_size;
    return need > r.blocks_held ? need - r.blocks_held : 0;
  }

  // P > 1: `prefills` (the running ones) plus the waiting prefills that step 3 will admit, walking
  // the waiting order as it does, until P are counted: a long prompt deferred by L is skipped; the
  // count stops at max_num_seqs, and at the first request whose KV for all of it does not fit in
  // what is free after `claimed` (the blocks the running prefills will still claim and those the
  // decodes take now), since nobody overtakes it. A request with one token left (it holds moved
  // KV, or its prompt is cached to its last token) is admitted but is a decode, not a prefill:
  // `decodes` counts those (moved KV stands before the prompts, see step 3). The count can still
  // exceed what step 3 admits when step 2 preempts or uses up the budget.
  uint32_t count_admissible_prefills(const hw_scheduler_snapshot& s, uint32_t prefills,
                                     uint32_t long_prefills, uint64_t claimed, uint32_t& decodes) {
    int64_t room = static_cast<int64_t>(s.kv_blocks_free) - static_cast<int64_t>(claimed);
    uint32_t seats = max_num_seqs_ > s.running_count ? max_num_seqs_ - s.running_count : 0;
    uint32_t waiting_long = 0;
    for (uint32_t k = 0; k < s.waiting_count && seats > 0; ++k) {
      const hw_request_view& w = waiting_at(s, k);
      const bool prefill = is_prefill(w);
      if (prefill && prefills >= max_partial_) break;
      const bool is_long = remaining_tokens(w) > threshold_;
      if (is_long && long_prefills + waiting_long >= max_long_) continue;
      const uint64_t whole = whole_prompt_blocks(w, s.block_size);
      if (whole > 0 && static_cast<int64_t>(whole) > room) break;
      room -= static_cast<int64_t>(whole);
      --seats;
      if (is_long) ++waiting_long;
      ++(prefill ? prefills : decodes);
    }
    return prefills;
  }

  // A preempted request recomputes prompt and outputs: it is a prefill again, whatever its length.
  static bool is_prefill(const hw_request_view& r) {
    return r.state == HW_REQUEST_PREFILLING || remaining_tokens(r) > 1;
  }

  // Tokens r may take this step before the budget left is applied. C goes by the prompt's whole
  // length (total_tokens), not by what is left, so it caps the deepest chunks too.
  uint32_t cap(const hw_request_view& r, bool partial, uint32_t share) const {
    const uint32_t left = remaining_tokens(r);
    if (partial) {
      if (!is_prefill(r)) return left;
      const uint32_t chunk = std::min(left, share);
      return long_chunk_ > 0 && r.total_tokens > threshold_ ? std::min(chunk, long_chunk_) : chunk;
    }
    return threshold_ > 0 ? std::min(left, threshold_) : left;  // `chunked`'s per-request cap
  }

  // Lexicographic "served earlier" key among running requests.
  bool running_before(const hw_scheduler_snapshot& s, bool partial, uint32_t a, uint32_t b) const {
    const hw_request_view& x = s.running[a];
    const hw_request_view& y = s.running[b];
    if (partial) {
      const bool px = is_prefill(x), py = is_prefill(y);
      if (px != py) return py;  // decodes first
    }
    if (priority_) {
      if (x.priority != y.priority) return x.priority < y.priority;
      if (x.arrival_time != y.arrival_time) return x.arrival_time < y.arrival_time;
    }
    if (x.admission_order != y.admission_order) return x.admission_order < y.admission_order;
    return a < b;
  }

  // Orders running_order_ for this step and, when P > 1, counts the running prefills and the long
  // ones among them. P = 1 with fcfs serves the snapshot's (admission) order exactly as `chunked`
  // does. Otherwise one pass splits decodes from prefills, each in snapshot order, which is already
  // the serving order when the snapshot is in admission order (as the ABI promises) and the policy
  // is fcfs; std::sort (no allocation) runs only when it is not.
  void order_running(const hw_scheduler_snapshot& s, bool partial, uint32_t& prefills,
                     uint32_t& long_prefills) {
    running_order_.clear();
    if (!partial) {
      for (uint32_t i = 0; i < s.running_count; ++i) running_order_.push_back(i);
      if (!priority_) return;
    } else {
      prefill_order_.clear();
      bool in_order = true;
      uint64_t last_decode = 0, last_prefill = 0;
      for (uint32_t i = 0; i < s.running_count; ++i) {
        const hw_request_view& r = s.running[i];
        if (is_prefill(r)) {
          in_order &= prefill_order_.empty() || r.admission_order > last_prefill;
          last_prefill = r.admission_order;
          prefill_order_.push_back(i);
          ++prefills;
          if (remaining_tokens(r) > threshold_) ++long_prefills;
        } else {
          in_order &= running_order_.empty() || r.admission_order > last_decode;
          last_decode = r.admission_order;
          running_order_.push_back(i);
        }
      }
      running_order_.insert(running_order_.end(), prefill_order_.begin(), prefill_order_.end());
      if (in_order && !priority_) return;
    }
    // The check stops at the first pair out of order, so it costs little when it fails.
    auto before = [&](uint32_t a, uint32_t b) { return running_before(s, partial, a, b); };
    if (std::is_sorted(running_order_.begin(), running_order_.end(), before)) return;
    if (priority_ && order_running_by_groups(s, partial)) return;
    std::sort(running_order_.begin(), running_order_.end(), before);
  }

  // Priority policy: running_order_ as running_before orders it, by a stable counting sort over
  // the groups (decodes before prefills when P > 1, then priority) of the snapshot, which is in
  // admission order; only a group whose members are not in (arrival, admission) order is sorted.
  // False, leaving running_order_ as it was, when there are more groups than QueueGroups holds.
  bool order_running_by_groups(const hw_scheduler_snapshot& s, bool partial) {
    running_group_.resize(s.running_count);
    const bool grouped = running_groups_.record(
        s.running_count,
        [&](uint32_t i) {
          const hw_request_view& r = s.running[i];
          const int64_t key = QueueGroups::priority_key(r.priority, partial && is_prefill(r));
          return QueueGroups::Member{key, r.arrival_time, r.admission_order};
        },
        [&](uint32_t i, uint8_t slot) { running_group_[i] = slot; });
    if (!grouped) return false;
    // Scatter in snapshot order; each group's start advances to its end.
    for (uint32_t i = 0; i < s.running_count; ++i) {
      running_order_[running_groups_.group(running_group_[i]).start++] = i;
    }
    auto before = [&](uint32_t a, uint32_t b) { return running_before(s, partial, a, b); };
    for (size_t rank = 0; rank < running_groups_.size(); ++rank) {
      const QueueGroups::Group& group = running_groups_.ranked(rank);
      if (group.in_order) continue;
      const auto end = running_order_.begin() + group.start;
      std::sort(end - group.count, end, before);
    }
    return true;
  }

  // Priority policy: the waiting queue by (holds moved KV, priority, arrival, queue position).
  // A waiting request that holds KV blocks (blocks_held > 0: its KV was moved here, and
  // Engine::reserve_incoming gave it blocks for at least its next step) goes before every other,
  // whatever its priority: otherwise a more urgent prompt that waits for free blocks holds it back
  // (nobody overtakes a head that does not fit) while it holds the very blocks that prompt waits
  // for, and with nothing running the engine stalls (conformance's moved_kv traces found it). The
  // engine queues such requests at the head, so fcfs serves them first anyway. Steps walk only the
  // head of the order, so it is built lazily. Usually one pass finds a few priorities whose
  // members stand in arrival order in the queue: then the order is each group's members in queue
  // order, lowest priority value first, and waiting_at() scans for them as far as a step reaches.
  // Otherwise waiting_order_ holds every position and each extension selects and sorts only the
  // next smallest ones (waiting_sorted_ entries are final).
  static bool holds_kv(const hw_request_view& w) { return w.blocks_held > 0; }
  // The waiting request's group: requests holding KV before all others, then by priority.
  static int64_t waiting_key(const hw_request_view& w) {
    return QueueGroups::priority_key(w.priority, !holds_kv(w));
  }

  bool waiting_before(const hw_scheduler_snapshot& s, uint32_t a, uint32_t b) const {
    const hw_request_view& x = s.waiting[a];
    const hw_request_view& y = s.waiting[b];
    if (holds_kv(x) != holds_kv(y)) return holds_kv(x);
    if (x.priority != y.priority) return x.priority < y.priority;
    if (x.arrival_time != y.arrival_time) return x.arrival_time < y.arrival_time;
    return a < b;
  }

  void start_waiting_order(const hw_scheduler_snapshot& s) {
    // Often the queue is already in order (one priority, arrival order): then it is used as it is.
    // The check stops at the first pair out of order; when it passes, it is the cheapest full pass.
    uint32_t i = 1;
    while (i < s.waiting_count && !waiting_before(s, i, i - 1)) ++i;
    if (i >= s.waiting_count) {
      waiting_mode_ = WaitingMode::kSnapshot;
      return;
    }
    waiting_order_.clear();
    const bool grouped = waiting_groups_.record(
        s.waiting_count,
        [&](uint32_t k) {
          const hw_request_view& w = s.waiting[k];
          return QueueGroups::Member{waiting_key(w), w.arrival_time, 0};
        },
        [](uint32_t, uint8_t) {});
    if (grouped && waiting_groups_.all_in_order()) {
      waiting_mode_ = WaitingMode::kGroups;
      group_rank_ = 0;
      group_taken_ = 0;
      group_scan_ = waiting_groups_.ranked(0).first;
      return;
    }
    waiting_mode_ = WaitingMode::kSorted;
    for (uint32_t j = 0; j < s.waiting_count; ++j) waiting_order_.push_back(j);
    waiting_sorted_ = 0;
  }

  // Appends to waiting_order_ the members of the groups, in rank order, up to position k.
  void extend_waiting_by_groups(const hw_scheduler_snapshot& s, uint32_t k) {
    while (waiting_order_.size() <= k) {
      const QueueGroups::Group& group = waiting_groups_.ranked(group_rank_);
      while (waiting_key(s.waiting[group_scan_]) != group.key) ++group_scan_;
      waiting_order_.push_back(group_scan_++);
      if (++group_taken_ == group.count && ++group_rank_ < waiting_groups_.size()) {
        group_taken_ = 0;
        group_scan_ = waiting_groups_.ranked(group_rank_).first;
      }
    }
  }

  void extend_waiting_order(const hw_scheduler_snapshot& s, uint32_t k) {
    const uint32_t count = static_cast<uint32_t>(waiting_order_.size());
    const uint32_t target = std::min(count, std::max({k + 1, 2 * waiting_sorted_, 32u}));
    auto before = [&](uint32_t a, uint32_t b) { return waiting_before(s, a, b); };
    const auto first = waiting_order_.begin() + waiting_sorted_;
    const auto last = waiting_order_.begin() + target;
    // partial_sort keeps a heap of the head and compares most of the rest once with its top.
    std::partial_sort(first, last, waiting_order_.end(), before);
    waiting_sorted_ = target;
  }

  // The k-th waiting request in serving order, for any k < s.waiting_count (a step's two walks
  // each ask for 0, 1, 2, ...; the order is built as far as the furthest k asked).
  const hw_request_view& waiting_at(const hw_scheduler_snapshot& s, uint32_t k) {
    assert(k < s.waiting_count);
    if (!priority_ || waiting_mode_ == WaitingMode::kSnapshot) return s.waiting[k];
    if (waiting_mode_ == WaitingMode::kGroups) {
      if (k >= waiting_order_.size()) extend_waiting_by_groups(s, k);
    } else if (k >= waiting_sorted_) {
      extend_waiting_order(s, k);
    }
    return s.waiting[waiting_order_[k]];
  }

  // Position in running_order_ of the request to preempt, from `first` on: the tail (fcfs), or the
  // lowest priority (highest value, then latest arrival, then latest admission). With the priority
  // policy and P > 1, `first` is 0: the victim may have been served this step.
  size_t victim(const hw_scheduler_snapshot& s, size_t first) const {
    const size_t last = running_order_.size() - 1;
    if (!priority_) return last;
    size_t v = last;
    for (size_t j = first; j < last; ++j) {
      const hw_request_view& c = s.running[running_order_[j]];
      const hw_request_view& b = s.running[running_order_[v]];
      if (c.priority != b.priority) {
        if (c.priority > b.priority) v = j;
      } else if (c.arrival_time != b.arrival_time) {
        if (c.arrival_time > b.arrival_time) v = j;
      } else if (c.admission_order > b.admission_order) {
        v = j;
      }
    }
    return v;
  }

  uint32_t budget_;
  uint32_t max_num_seqs_;
  uint32_t max_partial_;
  uint32_t max_long_;
  uint32_t threshold_;
  uint32_t long_chunk_;  // C; 0 = none
  bool priority_;
  std::vector<uint32_t> running_order_;  // indices into snapshot.running, in serving order
  std::vector<uint32_t> prefill_order_;  // scratch: running prefills, before joining the above
  std::vector<uint32_t> served_tokens_;  // tokens of the step's served running_order_ prefix
  std::vector<uint32_t> served_blocks_;  // and the KV blocks each took
  // Priority policy only, below.
  std::vector<uint8_t> running_group_;  // QueueGroups slot of each running request
  QueueGroups running_groups_;
  enum class WaitingMode : uint8_t {
    kSnapshot,  // the snapshot's order is the serving order
    kGroups,    // waiting_order_ grows by scanning for each group's members
    kSorted,    // waiting_order_ holds every position, sorted up to waiting_sorted_
  };
  WaitingMode waiting_mode_ = WaitingMode::kSnapshot;
  std::vector<uint32_t> waiting_order_;  // indices into snapshot.waiting, in serving order
  QueueGroups waiting_groups_;
  size_t group_rank_ = 0;        // kGroups: the group being taken
  uint32_t group_taken_ = 0;     // kGroups: its members already in waiting_order_
  uint32_t group_scan_ = 0;      // kGroups: where the scan for its next member resumes
  uint32_t waiting_sorted_ = 0;  // kSorted: the first waiting_sorted_ of waiting_order_ are final
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(PartialPrefillScheduler, "org.headway.scheduler.partial_prefill",
                         "partial_prefill", "0.1.0",
                         "Concurrent partial prefills with limits (vLLM V0 semantics)", kOptions)
