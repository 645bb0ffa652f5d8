// Refused plugin: a complete descriptor whose version string points to nothing (an address in the
// first pages, which Linux never maps). The host must refuse it by name before it copies the
// string, which would kill it with SIGSEGV.
#include <cstdint>
#include <headway/plugin.hpp>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubScheduler;
using Adapter = headway::test_plugins::StubAdapter;

const hw_plugin_descriptor kDescriptor = {
    sizeof(hw_plugin_descriptor),
    HW_ABI_MAJOR,
    HW_ABI_MINOR,
    HW_KIND_STEP_SCHEDULER,
    headway::sdk::make_str("org.headway.test.garbage_string"),
    headway::sdk::make_str("test_garbage_string"),
    hw_str{reinterpret_cast<const char*>(uintptr_t{0x1000}), 5},
    headway::sdk::make_str("Version string pointing to unmapped memory"),
    nullptr,
    0,
    &Adapter::table};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
