// A test-only step scheduler that declares no limits worth the name (UINT32_MAX tokens a step and
// requests running, legal in the ABI) and runs every request's remaining work where the KV cache
// has room. The engine sized its own arrays from max_num_seqs and died allocating 4G entries;
// it must run such a scheduler like any other.
#include <cstdint>
#include <headway/plugin.hpp>
#include <limits>

namespace {

using namespace headway::sdk;

class UnboundedScheduler final : public StepScheduler {
 public:
  UnboundedScheduler(const Host&, const Options&, const hw_engine_facts&) {}

  hw_scheduler_limits limits() const override {
    constexpr uint32_t kAll = std::numeric_limits<uint32_t>::max();
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), kAll, kAll};
  }

  void schedule(const hw_scheduler_snapshot& s, PlanWriter& plan) override {
    uint32_t free = s.kv_blocks_free;
    auto run = [&](const hw_request_view& r) {
      const uint32_t n = remaining_tokens(r);
      const uint32_t need = extra_blocks(r, n, s.block_size);
      if (n == 0 || need > free) return;
      plan.add_slice(r, n);
      free -= need;
    };
    for (uint32_t i = 0; i < s.running_count; ++i) run(s.running[i]);
    for (uint32_t i = 0; i < s.waiting_count; ++i) run(s.waiting[i]);
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(UnboundedScheduler, "org.headway.test.unbounded", "test_unbounded",
                         "0.0.1", "Test only: declares UINT32_MAX limits", no_options)
