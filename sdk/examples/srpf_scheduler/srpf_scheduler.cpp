// Shortest remaining prefill first, with aging: waiting requests are admitted by remaining tokens
// minus `aging` tokens per second waited (so long prompts are not starved), running ones first.
#include <algorithm>
#include <headway/plugin.hpp>
#include <vector>
using namespace headway::sdk;
constexpr hw_option_spec kOptions[] = {
    int_option("max_num_batched_tokens", 4096, 1, 1 << 24, "Tokens per step."),
    int_option("max_num_seqs", 128, 1, 1 << 16, "Requests running at once."),
    int_option("aging", 1000, 0, 1 << 30, "Tokens of priority gained per second waited.")};
struct Srpf final : StepScheduler {
  uint32_t budget_, seqs_, aging_;
  Srpf(const Host&, const Options& o, const hw_engine_facts&)
      : budget_(o.get_int("max_num_batched_tokens")),
        seqs_(o.get_int("max_num_seqs")),
        aging_(o.get_int("aging")) {}
  hw_scheduler_limits limits() const override { return {0, budget_, seqs_}; }  // size: adapter
  void schedule(const hw_scheduler_snapshot& s, PlanWriter& plan) override {
    uint32_t budget = budget_, free = s.kv_blocks_free, end = s.running_count, bs = s.block_size;
    for (uint32_t i = 0; i < end && budget > 0; ++i) {  // oldest first; evict the youngest
      const hw_request_view& r = s.running[i];
      const uint32_t n = std::min(remaining_tokens(r), budget), need = extra_blocks(r, n, bs);
      while (need > free && end > i + 1)
        free += blocks_freed_by_preempting(s.running[--end]), plan.preempt(s.running[end].id);
      if (need > free) return;
      plan.add_slice(r, n), budget -= n, free -= need;
    }
    if (end < s.running_count) return;  // a step that preempted admits nobody
    std::vector<const hw_request_view*> w;
    for (uint32_t i = 0; i < s.waiting_count; ++i) w.push_back(&s.waiting[i]);
    auto key = [&](auto* r) { return remaining_tokens(*r) - aging_ * (s.now - r->arrival_time); };
    std::stable_sort(w.begin(), w.end(), [&](auto* a, auto* b) { return key(a) < key(b); });
    for (uint32_t i = 0; i < w.size() && budget > 0 && end + i < seqs_; ++i) {
      uint32_t n = std::min(remaining_tokens(*w[i]), budget), need = extra_blocks(*w[i], n, bs);
      if (need > free) continue;  // too big for the KV left: smaller ones may still fit
      plan.add_slice(*w[i], n), budget -= n, free -= need;
    }
  }
};
HEADWAY_EXPORT_SCHEDULER(Srpf, "com.example.scheduler.srpf", "srpf", "0.1.0", "SRPF", kOptions)
