// The profile runs in a child process: a plugin that crashes still gets a verdict and a report,
// and a result survives the trip through the pipe unchanged.
#include <gtest/gtest.h>
#include <headway/conformance/isolated_run.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../integration/cli_runner.h"

namespace {

using headway::conformance::Outcome;
using headway::conformance::ProfileResult;

TEST(IsolatedRun, AResultCrossesThePipeUnchanged) {
  ProfileResult r;
  r.profile = "router-core";
  r.mustpass = "router-core-v1";
  r.missing_core = {"router.create"};
  r.seconds = 0.75;
  headway::conformance::TestResult t;
  t.id = "router.steady_state_heap";
  t.title = "a title";
  t.outcome = Outcome::kQualityWarning;
  t.message = "heap grew";
  t.seconds = 0.25;
  t.metrics = {{"calls", 6000}};
  t.declared_feature = true;
  r.tests.push_back(t);
  t.id = "router.create";
  t.outcome = Outcome::kNotSupported;
  t.core = true;
  t.declared_feature = false;
  r.tests.push_back(t);
  const ProfileResult back = headway::conformance::profile_result_from_json(
      nlohmann::json::parse(headway::conformance::profile_result_to_json(r).dump()));
  EXPECT_EQ(back.profile, r.profile);
  EXPECT_EQ(back.mustpass, r.mustpass);
  EXPECT_EQ(back.missing_core, r.missing_core);
  EXPECT_EQ(back.seconds, r.seconds);
  ASSERT_EQ(back.tests.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.tests[i].id, r.tests[i].id);
    EXPECT_EQ(back.tests[i].outcome, r.tests[i].outcome);
    EXPECT_EQ(back.tests[i].message, r.tests[i].message);
    EXPECT_EQ(back.tests[i].seconds, r.tests[i].seconds);
    EXPECT_EQ(back.tests[i].metrics, r.tests[i].metrics);
    EXPECT_EQ(back.tests[i].core, r.tests[i].core);
    EXPECT_EQ(back.tests[i].declared_feature, r.tests[i].declared_feature);
  }
  EXPECT_EQ(back.summary_line(), r.summary_line());
}

TEST(IsolatedRun, APluginThatCrashesTheSuiteStillGetsAVerdictAndAReport) {
  namespace fs = std::filesystem;
  const fs::path report =
      fs::temp_directory_path() / ("headway_crash_report_" + std::to_string(::getpid()) + ".json");
  const auto run = headway::test::run_program(
      HEADWAY_CONFORMANCE_CLI, std::string("--plugin ") + HEADWAY_FAULTY_PLUGIN_DIR +
                                   "/faulty_crashing_scheduler.so --report " + report.string());
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("suite.completed"), std::string::npos) << run.out;
  // SIGSEGV, or under AddressSanitizer its report and an abort (or exit 1 without
  // abort_on_error): how the child ended is named either way.
  EXPECT_NE(run.out.find("before it finished"), std::string::npos) << run.out;
  // Advice to rebuild with AddressSanitizer is for a build without it; one with it has its report.
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_NE(run.out.find("this build has AddressSanitizer: where it found the fault"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("a build with AddressSanitizer"), std::string::npos) << run.out;
#else
  EXPECT_NE(run.out.find("a build with AddressSanitizer, to see where"), std::string::npos)
      << run.out;
#endif
  EXPECT_NE(run.out.find("NOT CONFORMANT"), std::string::npos) << run.out;
  std::ifstream in(report);
  ASSERT_TRUE(in) << "no report written";
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_FALSE(j["conformant"].get<bool>());
  fs::remove(report);
}

// A router that keeps the request_class pointer abi.h lends for one call, and compares it with the
// next class of the same size: router.request_classes draws classes of one length with changing
// contents and makes each unreadable as route() returns, so the kept pointer's read crashes the
// profile's process in any build (with four classes of four lengths in turn it was never read).
TEST(IsolatedRun, ARouterKeepingTheLentClassPointerCrashesTheSuiteAndFails) {
  const auto run = headway::test::run_program(
      HEADWAY_CONFORMANCE_CLI,
      std::string("--plugin ") + HEADWAY_FAULTY_PLUGIN_DIR + "/faulty_pointer_keeping_router.so");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("suite.completed"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("before it finished"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("NOT CONFORMANT"), std::string::npos) << run.out;
}

TEST(IsolatedRun, APluginThatHangsIsKilledAfterTheTimeoutAndReported) {
  const auto run = headway::test::run_program(
      HEADWAY_CONFORMANCE_CLI, std::string("--timeout 2 --plugin ") + HEADWAY_FAULTY_PLUGIN_DIR +
                                   "/faulty_hanging_scheduler.so");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("suite.completed"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("still running after 2 s (--timeout)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("NOT CONFORMANT"), std::string::npos) << run.out;
}

}  // namespace
