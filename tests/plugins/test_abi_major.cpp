// Refused plugin: built for the next ABI major. The descriptor is written by hand because the SDK
// macros always stamp the SDK's own version. Otherwise valid.
#include <headway/plugin.hpp>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubScheduler;
using Adapter = headway::test_plugins::StubAdapter;

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR + 1,
                                          0,
                                          HW_KIND_STEP_SCHEDULER,
                                          headway::sdk::make_str("org.headway.test.abi_major"),
                                          headway::sdk::make_str("test_abi_major"),
                                          headway::sdk::make_str("0.0.1"),
                                          headway::sdk::make_str("Built for a newer ABI major"),
                                          nullptr,
                                          0,
                                          &Adapter::table};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
