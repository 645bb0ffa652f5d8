// Refused plugin: same ABI major but a newer minor than the host's, i.e. it may rely on fields the
// host does not know. Otherwise valid.
#include <headway/plugin.hpp>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubScheduler;
using Adapter = headway::test_plugins::StubAdapter;

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR,
                                          HW_ABI_MINOR + 1,
                                          HW_KIND_STEP_SCHEDULER,
                                          headway::sdk::make_str("org.headway.test.abi_minor"),
                                          headway::sdk::make_str("test_abi_minor"),
                                          headway::sdk::make_str("0.0.1"),
                                          headway::sdk::make_str("Built for a newer ABI minor"),
                                          nullptr,
                                          0,
                                          &Adapter::table};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
