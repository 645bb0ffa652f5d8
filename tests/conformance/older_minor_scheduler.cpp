// A valid scheduler whose descriptor declares ABI 1.2, an older minor than the host's, as a plugin
// built against an older SDK would: the conformance suite loads it (abi_minor_test.cpp), and it
// predates hw_request_view.blocks_shared (1.3), so the engine shares no cached blocks with it
// (engine_prefix_caching_test.cpp).
#include <headway/plugin.hpp>

namespace {

class OlderMinorScheduler final : public headway::sdk::StepScheduler {
 public:
  OlderMinorScheduler(const headway::sdk::Host&, const headway::sdk::Options&,
                      const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 2048, 64};
  }
  // FCFS, decodes first, whole KV checks: enough to be conformant.
  void schedule(const hw_scheduler_snapshot& s, headway::sdk::PlanWriter& plan) override {
    uint32_t budget = 2048, free = s.kv_blocks_free, end = s.running_count;
    for (uint32_t i = 0; i < end && budget > 0; ++i) {
      const hw_request_view& r = s.running[i];
      const uint32_t n = std::min(headway::sdk::remaining_tokens(r), budget);
      const uint32_t need = headway::sdk::extra_blocks(r, n, s.block_size);
      while (need > free && end > i + 1) {
        free += s.running[--end].blocks_held;
        plan.preempt(s.running[end].id);
      }
      if (need > free) return;
      plan.add_slice(r, n);
      budget -= n;
      free -= need;
    }
    if (end < s.running_count) return;
    for (uint32_t i = 0; i < s.waiting_count && budget > 0 && end + i < 64; ++i) {
      const uint32_t n = std::min(headway::sdk::remaining_tokens(s.waiting[i]), budget);
      const uint32_t need = headway::sdk::extra_blocks(s.waiting[i], n, s.block_size);
      if (need > free) return;
      plan.add_slice(s.waiting[i], n);
      budget -= n;
      free -= need;
    }
  }
};

using Adapter = headway::sdk::SchedulerAdapter<OlderMinorScheduler>;

constexpr uint32_t kOlderMinor = 2;
static_assert(HW_ABI_MAJOR == 1 && kOlderMinor < HW_ABI_MINOR);

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR,
                                          kOlderMinor,
                                          HW_KIND_STEP_SCHEDULER,
                                          headway::sdk::make_str("org.headway.test.older_minor"),
                                          headway::sdk::make_str("test_older_minor"),
                                          headway::sdk::make_str("0.0.1"),
                                          headway::sdk::make_str("Built against ABI 1.2"),
                                          nullptr,
                                          0,
                                          &Adapter::table};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
