// A plugin built against an older ABI minor loads and runs: a minor bump only appends, so the host
// reads an older plugin's structs by their struct_size (DESIGN.md, docs/sdk.md).
#include <gtest/gtest.h>

#include "suite_runner.h"

namespace {

TEST(AbiMinor, PluginBuiltAgainstOlderMinorLoadsAndIsConformant) {
  const std::string path =
      std::string(HEADWAY_CONFORMANCE_TEST_PLUGIN_DIR) + "/older_minor_scheduler.so";
  const auto& plugin = headway::test::conformance_registry().load_path(path);
  ASSERT_LT(plugin.descriptor->abi_minor, HW_ABI_MINOR);
  const auto result = headway::test::run_suite(path);
  EXPECT_TRUE(result.conformant()) << headway::test::describe(result);
}

}  // namespace
