// A plugin built against an older ABI minor loads and runs: a minor bump only appends, so the host
// reads an older plugin's structs by their struct_size (DESIGN.md, docs/sdk.md).
#include <gtest/gtest.h>

#include "suite_runner.h"

namespace {

TEST(AbiMinor, PluginBuiltAgainstOlderMinorLoadsAndIsConformant) {
  if (HW_ABI_MINOR == 0) {
    GTEST_SKIP() << "the host ABI is " << HW_ABI_MAJOR << ".0: no older minor exists to build "
                 << "against (bump HW_ABI_MINOR to 1 to exercise this)";
  }
  const std::string path =
      std::string(HEADWAY_CONFORMANCE_TEST_PLUGIN_DIR) + "/older_minor_scheduler.so";
  const auto& plugin = headway::test::conformance_registry().load_path(path);
  ASSERT_EQ(plugin.descriptor->abi_minor, HW_ABI_MINOR - 1);
  const auto result = headway::test::run_suite(path);
  EXPECT_TRUE(result.conformant()) << headway::test::describe(result);
}

}  // namespace
