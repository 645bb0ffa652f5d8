// simulate's watch of plugin calls that do not return: a call running past the first warning is
// logged naming what runs, again each time its age doubles (not on every look), and calls that
// end in time are not logged.
#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/core/long_call_watch.h>
#include <headway/core/simulator.h>
#include <headway/core/workload.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "../test_support/built_plugins.h"
#include "../test_support/captured_log.h"

namespace headway::core {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(LongCallWatch, ACallThatHasNotReturnedIsLoggedAgainEachTimeItsAgeDoubles) {
  test::CapturedLog log;
  double seconds = 0;
  {
    LongCallWatch watch("deploy.toml", 0.05);
    const auto began = std::chrono::steady_clock::now();
    watch.began(LongCallWatch::Call::kStep, 3);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    watch.ended();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  }
  const std::string logged = log.text();
  const std::string line =
      "deploy.toml: engine3 has been in one step (its scheduler or model) for ";
  // One line past 0.05 s, 0.1 s, 0.2 s, ...: five in a second however often the watcher looked
  // (every 12.5 ms), and at least the first two.
  const auto doublings = static_cast<size_t>(std::floor(std::log2(seconds / 0.05)));
  EXPECT_GE(count(logged, line), 2u) << logged;
  EXPECT_LE(count(logged, line), doublings + 1) << logged;
  EXPECT_NE(logged.find("simulate waits for it (Ctrl-C ends the run)"), std::string::npos)
      << logged;
}

TEST(LongCallWatch, EachKindOfCallIsNamed) {
  test::CapturedLog log;
  {
    LongCallWatch watch("run", 0.05);
    for (const LongCallWatch::Call call :
         {LongCallWatch::Call::kRoute, LongCallWatch::Call::kTransport}) {
      const WatchedCall running(&watch, call);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  }
  const std::string logged = log.text();
  EXPECT_NE(logged.find("run: the router's route() has not returned for "), std::string::npos)
      << logged;
  EXPECT_NE(logged.find("run: a call of the KV transport (a transfer's start or poll) has not "
                        "returned for "),
            std::string::npos)
      << logged;
}

TEST(LongCallWatch, CallsThatEndInTimeAreNotLogged) {
  test::CapturedLog log;
  {
    LongCallWatch watch("run", 1.0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
    for (uint32_t i = 0; std::chrono::steady_clock::now() < until; ++i) {
      const WatchedCall step(&watch, LongCallWatch::Call::kStep, i % 4);
    }
  }
  EXPECT_EQ(log.text(), "");
}

// Wired into simulate: a wall-clock run whose model takes 1.5 s for its first step says so, and
// still completes.
TEST(LongCallWatch, SimulateNamesTheEngineOfALongStep) {
  test::CapturedLog log;
  {
    const DeploymentConfig deployment =
        parse_deployment("[model]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
                             "/test_slow_model.so\"\n[[engines]]\nkv_blocks = 64\n",
                         "slow.toml", test::built_plugins());
    Workload workload;
    workload.source = "in-test";
    workload.classes = {RequestClass{"short", false}};
    workload.requests.push_back(WorkloadRequest{0, 0, 0.0, 16, 3, 0});
    SimulationOptions options;
    options.long_call_warning_seconds = 0.1;
    const SimulationResult result = simulate(deployment, workload, options);
    ASSERT_EQ(result.records.size(), 1u);
    EXPECT_EQ(result.records[0].output_tokens, 3u);
  }
  const std::string logged = log.text();
  EXPECT_NE(logged.find("engine0 has been in one step (its scheduler or model) for "),
            std::string::npos)
      << logged;
}

}  // namespace
}  // namespace headway::core
