// The JSON report names the plugin, its ABI, the host and the machine; JUnit XML marks failures.
#include <gtest/gtest.h>
#include <headway/conformance/report.h>

#include "suite_runner.h"

namespace {

headway::conformance::RunInfo run_info() {
  headway::conformance::RunInfo info;
  info.plugin_name = "org.headway.faulty.starving";
  info.plugin_version = "0.0.1";
  info.plugin_abi = "1.0";
  info.host_version = "0.1.0";
  info.machine = headway::conformance::machine_info();
  return info;
}

TEST(ConformanceReport, JsonNamesPluginHostAndMachine) {
  const auto r = headway::test::run_suite(std::string(HEADWAY_FAULTY_PLUGIN_DIR) +
                                          "/faulty_starving_scheduler.so");
  const nlohmann::json j = headway::conformance::report_json(run_info(), r);
  EXPECT_EQ(j["plugin"]["name"], "org.headway.faulty.starving");
  EXPECT_EQ(j["plugin"]["abi"], "1.0");
  EXPECT_EQ(j["host"]["version"], "0.1.0");
  EXPECT_GT(j["machine"]["cpus"].get<unsigned>(), 0u);
  EXPECT_FALSE(j["machine"]["system"].get<std::string>().empty());
  EXPECT_FALSE(j["conformant"].get<bool>());
  EXPECT_EQ(j["mustpass"], "step-scheduler-core-v1");
}

TEST(ConformanceReport, JunitHasOneFailurePerFailedTest) {
  const auto r = headway::test::run_suite(std::string(HEADWAY_FAULTY_PLUGIN_DIR) +
                                          "/faulty_starving_scheduler.so");
  const std::string xml = headway::conformance::junit_xml(run_info(), r);
  EXPECT_NE(xml.find("<testsuite name=\"step-scheduler-core\""), std::string::npos);
  EXPECT_NE(xml.find("name=\"scheduler.no_starvation\""), std::string::npos);
  size_t failures = 0;
  for (size_t at = xml.find("<failure"); at != std::string::npos;
       at = xml.find("<failure", at + 1)) {
    ++failures;
  }
  EXPECT_EQ(failures, 1u) << xml;
}

TEST(ConformanceReport, MustpassListsAreVersionedAndNonEmpty) {
  for (const std::string& profile : headway::conformance::profile_names()) {
    EXPECT_FALSE(headway::conformance::mustpass_tests(profile + "-v1").empty()) << profile;
  }
}

}  // namespace
