// Refused plugin: its description claims 2^62 bytes behind a short string (a garbage size, as from
// an uninitialised or mis-built descriptor). The host must refuse it by name before it copies the
// string, which used to end in a bare std::bad_alloc (or a read past the library).
#include <cstddef>
#include <headway/plugin.hpp>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubScheduler;
using Adapter = headway::test_plugins::StubAdapter;

constexpr uint64_t kGarbageSize = uint64_t{1} << 62;

const hw_plugin_descriptor kDescriptor = {
    sizeof(hw_plugin_descriptor),
    HW_ABI_MAJOR,
    HW_ABI_MINOR,
    HW_KIND_STEP_SCHEDULER,
    headway::sdk::make_str("org.headway.test.huge_description"),
    headway::sdk::make_str("test_huge_description"),
    headway::sdk::make_str("0.0.1"),
    hw_str{"a description", kGarbageSize},
    nullptr,
    0,
    &Adapter::table};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
