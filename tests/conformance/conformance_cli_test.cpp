// headway-conformance as a command: what is the operator's mistake (exit 2, a message naming it)
// and what is the plugin's (exit 1, a verdict).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../integration/cli_runner.h"

namespace {

namespace fs = std::filesystem;

// The CPU model needs its checkpoint directory: without `path`, nothing about the plugin was
// tested, so "NOT CONFORMANT" (exit 1) would fail a CI job over a good plugin.
TEST(ConformanceCli, AModelWithoutItsCheckpointIsAUsageErrorNamingTheMissingOption) {
  const std::string plugin = std::string(HEADWAY_PLUGIN_DIR) + "/headway_model_cpu.so";
  if (!fs::exists(plugin)) GTEST_SKIP() << "the CPU model plugin is not built";
  const auto run = headway::test::run_program(HEADWAY_CONFORMANCE_CLI, "--plugin " + plugin);
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("'cpu' refused the options given (none) when the suite set it up"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("option 'path' (the checkpoint directory) is required"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("--options 'key = value, ...'"), std::string::npos) << run.err;
  EXPECT_EQ(run.out.find("NOT CONFORMANT"), std::string::npos) << run.out;
}

// A leaking scheduler fails its heap tests; its replay in another process (the determinism test)
// must not fail too: under LeakSanitizer that process ended with LSan's status, reported as
// plans that differ between processes (helper-164). (Without a sanitizer nothing ends it, and
// this test cannot fail.)
TEST(ConformanceCli, ALeakingSchedulersReplayIsNotADeterminismFailure) {
  const auto run = headway::test::run_program(
      HEADWAY_CONFORMANCE_CLI, std::string("--plugin ") + HEADWAY_FAULTY_PLUGIN_DIR +
                                   "/faulty_leaking_scheduler.so --options 'plans = true, "
                                   "unreachable = true'");
  // (Its exit status is not asserted: under LeakSanitizer this process, which ran the plugin too,
  // ends with LSan's. The heap tests that fail it are extended: v1's verdict does not count them.)
  const size_t line = run.out.find("scheduler.same_across_processes");
  ASSERT_NE(line, std::string::npos) << run.out;
  const size_t begin = run.out.rfind('\n', line) + 1;  // npos + 1 == 0 for the first line
  EXPECT_EQ(run.out.compare(begin, 4, "PASS"), 0)
      << run.out.substr(begin, run.out.find('\n', line) - begin) << "\n"
      << run.err;
  EXPECT_NE(run.out.find("FAIL             extended scheduler.steady_state_heap"),
            std::string::npos)
      << run.out;
}

TEST(ConformanceCli, AnUnknownProfileIsRefusedBeforeAnyHeaderIsPrinted) {
  const auto run = headway::test::run_program(
      HEADWAY_CONFORMANCE_CLI, std::string("--profile router-cor --plugin ") + HEADWAY_PLUGIN_DIR +
                                   "/headway_router_length.so");
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("--profile: unknown profile 'router-cor' (known: step-scheduler-core, "
                         "router-core, kv-transport-core, model-core)"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.out.find("router-cor"), std::string::npos) << run.out;
}

}  // namespace
