// Refused plugin: its descriptor's struct_size claims fewer bytes than ABI 1.0's descriptor (as if
// the table pointer were missing). The struct itself is complete, so reading it is safe.
#include <cstddef>
#include <headway/plugin.hpp>

namespace {

class StubScheduler final : public headway::sdk::StepScheduler {
 public:
  StubScheduler(const headway::sdk::Host&, const headway::sdk::Options&, const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 16, 1};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {}
};

using Adapter = headway::sdk::SchedulerAdapter<StubScheduler>;

const hw_plugin_descriptor kDescriptor = {
    offsetof(hw_plugin_descriptor, table),
    HW_ABI_MAJOR,
    HW_ABI_MINOR,
    HW_KIND_STEP_SCHEDULER,
    headway::sdk::make_str("org.headway.test.small_descriptor"),
    headway::sdk::make_str("test_small_descriptor"),
    headway::sdk::make_str("0.0.1"),
    headway::sdk::make_str("Descriptor struct_size too small"),
    nullptr,
    0,
    &Adapter::table};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
