#include <fmt/format.h>
#include <headway/core/plan_validator.h>

#include <algorithm>

namespace headway::core {

const PlanValidator::Entry* PlanValidator::find_sorted(const std::vector<Entry>& index,
                                                       uint64_t id) {
  auto it = std::lower_bound(index.begin(), index.end(), id,
                             [](const Entry& e, uint64_t v) { return e.id < v; });
  return it != index.end() && it->id == id ? &*it : nullptr;
}

std::optional<std::string> PlanValidator::validate(const hw_scheduler_snapshot& snapshot,
                                                   const hw_scheduler_plan& plan,
                                                   const hw_scheduler_limits& limits) {
  if (plan.slice_count > plan.slice_capacity || plan.preempted_count > plan.preempted_capacity) {
    return fmt::format("plan claims {} slices / {} preemptions, beyond its arrays' capacity",
                       plan.slice_count, plan.preempted_count);
  }
  // Running requests are few (max_num_seqs): index them all. The waiting queue can be long, and
  // plans almost always admit from its head, so waiting requests are first looked for among the
  // first kWaitingScan entries; only a plan reaching deeper pays for indexing the whole queue once.
  constexpr uint32_t kWaitingScan = 64;
  running_index_.clear();
  for (uint32_t i = 0; i < snapshot.running_count; ++i) {
    running_index_.push_back(Entry{snapshot.running[i].id, i, true});
  }
  auto by_id = [](const Entry& a, const Entry& b) { return a.id < b.id; };
  std::sort(running_index_.begin(), running_index_.end(), by_id);
  bool waiting_indexed = false;

  auto lookup = [&](uint64_t id) -> std::optional<Entry> {
    if (const Entry* e = find_sorted(running_index_, id)) return *e;
    uint32_t scan = std::min(snapshot.waiting_count, kWaitingScan);
    for (uint32_t i = 0; i < scan; ++i) {
      if (snapshot.waiting[i].id == id) return Entry{id, i, false};
    }
    if (snapshot.waiting_count <= kWaitingScan) return std::nullopt;
    if (!waiting_indexed) {
      waiting_index_.clear();
      for (uint32_t i = 0; i < snapshot.waiting_count; ++i) {
        waiting_index_.push_back(Entry{snapshot.waiting[i].id, i, false});
      }
      std::sort(waiting_index_.begin(), waiting_index_.end(), by_id);
      waiting_indexed = true;
    }
    if (const Entry* e = find_sorted(waiting_index_, id)) return *e;
    return std::nullopt;
  };

  seen_.clear();
  uint32_t released_blocks = 0;
  for (uint32_t i = 0; i < plan.preempted_count; ++i) {
    uint64_t id = plan.preempted[i];
    std::optional<Entry> e = lookup(id);
    if (!e) return fmt::format("preemption #{} names unknown request {}", i, id);
    if (!e->running)
      return fmt::format("preemption #{} names request {} which is not running", i, id);
    // Blocks another request holds too (shared through the prefix cache) stay held.
    const hw_request_view& victim = snapshot.running[e->index];
    released_blocks += victim.blocks_held - victim.blocks_shared;
    seen_.push_back(id);
  }

  uint64_t budget_used = 0;
  uint64_t blocks_needed = 0;
  uint32_t admitted = 0;
  for (uint32_t i = 0; i < plan.slice_count; ++i) {
    const hw_slice& s = plan.slices[i];
    std::optional<Entry> e = lookup(s.request_id);
    if (!e) return fmt::format("slice #{} names unknown request {}", i, s.request_id);
    const hw_request_view& r = e->running ? snapshot.running[e->index] : snapshot.waiting[e->index];
    seen_.push_back(s.request_id);
    if (s.tokens == 0) return fmt::format("slice #{} (request {}) has zero tokens", i, r.id);
    if (s.start != r.computed_tokens) {
      return fmt::format(
          "slice #{} (request {}) starts at {} but the request has {} computed tokens", i, r.id,
          s.start, r.computed_tokens);
    }
    uint32_t left = r.total_tokens - r.computed_tokens;
    if (s.tokens > left) {
      return fmt::format("slice #{} (request {}) takes {} tokens but only {} are left", i, r.id,
                         s.tokens, left);
    }
    if (static_cast<uint64_t>(s.start) + s.tokens > snapshot.max_model_len) {
      return fmt::format("slice #{} (request {}) reaches position {} beyond max_model_len {}", i,
                         r.id, static_cast<uint64_t>(s.start) + s.tokens, snapshot.max_model_len);
    }
    budget_used += s.tokens;
    uint64_t need =
        (static_cast<uint64_t>(r.computed_tokens) + s.tokens + snapshot.block_size - 1) /
        snapshot.block_size;
    blocks_needed += need > r.blocks_held ? need - r.blocks_held : 0;
    if (!e->running) ++admitted;
  }

  std::sort(seen_.begin(), seen_.end());
  if (auto dup = std::adjacent_find(seen_.begin(), seen_.end()); dup != seen_.end()) {
    return fmt::format("request {} appears more than once in the plan", *dup);
  }
  if (budget_used > limits.max_num_batched_tokens) {
    return fmt::format("plan schedules {} tokens, over the budget of {}", budget_used,
                       limits.max_num_batched_tokens);
  }
  uint64_t running_after = snapshot.running_count - plan.preempted_count + admitted;
  if (running_after > limits.max_num_seqs) {
    return fmt::format("plan leaves {} requests running, over max_num_seqs {}", running_after,
                       limits.max_num_seqs);
  }
  uint64_t available = static_cast<uint64_t>(snapshot.kv_blocks_free) + released_blocks;
  if (blocks_needed > available) {
    return fmt::format("plan needs {} new KV blocks but only {} are free ({} after preemptions)",
                       blocks_needed, snapshot.kv_blocks_free, available);
  }
  return std::nullopt;
}

}  // namespace headway::core
