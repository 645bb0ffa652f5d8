// Refused plugin: its scheduler table lacks the mandatory schedule() function.
#include <headway/plugin.hpp>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubScheduler;
using Adapter = headway::test_plugins::StubAdapter;

const hw_scheduler_table kTable = {sizeof(hw_scheduler_table), &Adapter::create, &Adapter::destroy,
                                   &Adapter::get_limits, nullptr};

const hw_plugin_descriptor kDescriptor = {
    sizeof(hw_plugin_descriptor),
    HW_ABI_MAJOR,
    HW_ABI_MINOR,
    HW_KIND_STEP_SCHEDULER,
    headway::sdk::make_str("org.headway.test.missing_function"),
    headway::sdk::make_str("test_missing_function"),
    headway::sdk::make_str("0.0.1"),
    headway::sdk::make_str("Scheduler table without schedule()"),
    nullptr,
    0,
    &kTable};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
