// The JSON report names the plugin, its ABI, the host and the machine; JUnit XML marks failures.
#include <gtest/gtest.h>
#include <headway/conformance/report.h>
#include <headway/conformance/suite.h>
#include <headway/core/error.h>

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
  EXPECT_EQ(j["mustpass"], "step-scheduler-core-v3");
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

// Tests judged from one pass over the traces each report the pass's time: the suite's time is the
// profile's own wall time, not their sum.
TEST(ConformanceReport, JunitSuiteTimeIsTheProfilesWallTimeNotTheSumOfSharedTimes) {
  headway::conformance::ProfileResult r;
  r.profile = "step-scheduler-core";
  r.mustpass = "step-scheduler-core-v1";
  r.seconds = 1.5;
  for (const char* id :
       {"scheduler.plans_valid", "scheduler.all_finish", "scheduler.deterministic"}) {
    headway::conformance::TestResult& t = r.tests.emplace_back();
    t.id = id;
    t.seconds = 1.25;
  }
  const std::string xml = headway::conformance::junit_xml(run_info(), r);
  EXPECT_NE(xml.find("time=\"1.500\" hostname="), std::string::npos) << xml;
  EXPECT_EQ(headway::conformance::report_json(run_info(), r)["seconds"].get<double>(), 1.5);
}

// A core test NOT_SUPPORTED does not count against conformance, but the summary must not count it
// as passed either.
TEST(ConformanceReport, TheSummaryCountsCoreTestsNotSupportedApart) {
  headway::conformance::ProfileResult r;
  r.profile = "model-core";
  for (const auto outcome :
       {headway::conformance::Outcome::kPass, headway::conformance::Outcome::kNotSupported,
        headway::conformance::Outcome::kPass}) {
    headway::conformance::TestResult t;
    t.outcome = outcome;
    t.core = true;
    r.tests.push_back(t);
  }
  EXPECT_EQ(r.summary_line(),
            "model-core: core 2/3 passed (1 not supported), extended 0 passed 0 failed 0 skipped "
            "0 not supported, 0 quality warnings: CONFORMANT");
  r.missing_core.push_back("model.gone");
  EXPECT_NE(r.summary_line().find("core 2/4 passed (1 not supported, 1 missing)"),
            std::string::npos)
      << r.summary_line();
}

TEST(ConformanceReport, UnknownFeaturesAreRefusedNamingTheKnownOnes) {
  using headway::conformance::check_features;
  EXPECT_NO_THROW(check_features(HW_KIND_ROUTER, {"pools", "disaggregation"}));
  try {
    check_features(HW_KIND_ROUTER, {"pools", "nonsense"});
    ADD_FAILURE() << "no error";
  } catch (const headway::core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nonsense' is not a feature of a router (known: pools, "
                                         "disaggregation)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_features(HW_KIND_STEP_SCHEDULER, {"pools"}), headway::core::Error);
}

TEST(ConformanceReport, MustpassListsAreVersionedAndNonEmpty) {
  for (const std::string& profile : headway::conformance::profile_names()) {
    EXPECT_FALSE(headway::conformance::mustpass_tests(profile + "-v1").empty()) << profile;
  }
}

}  // namespace
