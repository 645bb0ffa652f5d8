// Refused plugin: its descriptor's struct_size claims fewer bytes than ABI 1.0's descriptor (as if
// the table pointer were missing). The struct itself is complete, so reading it is safe.
#include <cstddef>
#include <headway/plugin.hpp>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubScheduler;
using Adapter = headway::test_plugins::StubAdapter;

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
