// stats_line(): the rates of an interval, the load at its end, and silence while idle.
#include <gtest/gtest.h>
#include <headway/serving/stats_line.h>

namespace headway::serving {
namespace {

StatsSample busy_start() {
  StatsSample s;
  s.seconds = 100.0;
  s.totals.prompt_tokens = 5000;
  s.totals.prefill_tokens = 4000;
  s.totals.generation_tokens = 300;
  s.totals.prefix_cache_queries = 1000;
  s.totals.prefix_cache_hits = 200;
  s.engines_alive = 2;
  s.engines_total = 2;
  return s;
}

TEST(StatsLine, GivesTheIntervalsRatesAndTheLoadAtItsEnd) {
  const StatsSample before = busy_start();
  StatsSample now = before;
  now.seconds = 110.0;
  now.totals.prompt_tokens += 9999;  // admitted: not what a process with steps reports
  now.totals.prefill_tokens += 8124;
  now.totals.generation_tokens += 950;
  now.totals.prefix_cache_queries += 4000;
  now.totals.prefix_cache_hits += 3000;
  now.totals.preemptions += 2;
  now.running = 8;
  now.waiting = 2;
  now.kv_blocks_used = 413;
  now.kv_blocks_total = 1000;
  EXPECT_EQ(stats_line(before, now),
            "prompt 812.4 tokens/s, generation 95.0 tokens/s, running 8, waiting 2, KV cache "
            "41.3% used, prefix cache 75.0% hit, 2 preemptions");
}

TEST(StatsLine, ARouterCountsThePromptsItAdmittedAndNamesEnginesThatAreDown) {
  StatsSample before;
  before.seconds = 1.0;
  before.engines_alive = 2;
  before.engines_total = 2;
  StatsSample now = before;
  now.seconds = 3.0;
  now.totals.prompt_tokens = 100;  // no steps here: prefill_tokens stays 0
  now.totals.generation_tokens = 10;
  now.running = 1;
  now.engines_alive = 1;
  EXPECT_EQ(stats_line(before, now),
            "prompt 50.0 tokens/s, generation 5.0 tokens/s, running 1, waiting 0, engines 1 of 2 "
            "alive");
}

// A step running for kSlowStepSeconds or more is named: the rates alone read as an idle server.
TEST(StatsLine, NamesAnEngineInOneStepForLong) {
  const StatsSample before = busy_start();
  StatsSample now = before;
  now.seconds = 110.0;
  now.running = 4;
  now.longest_step_seconds = kSlowStepSeconds - 1.0;
  now.longest_step_engine = 1;
  EXPECT_EQ(stats_line(before, now).find("in one step"), std::string::npos);
  now.longest_step_seconds = 75.4;
  EXPECT_EQ(stats_line(before, now),
            "prompt 0.0 tokens/s, generation 0.0 tokens/s, running 4, waiting 0, engine 1 in one "
            "step for 75 s (a model or scheduler call that has not returned?)");
}

TEST(StatsLine, AnIdleServerSaysNothing) {
  const StatsSample before = busy_start();
  StatsSample now = before;
  now.seconds += 10.0;
  EXPECT_EQ(stats_line(before, now), "");
  // Something waiting is not idle, even when no token moved.
  now.waiting = 3;
  EXPECT_NE(stats_line(before, now), "");
  // Nor is an engine that went down.
  now.waiting = 0;
  now.engines_alive = 1;
  EXPECT_NE(stats_line(before, now).find("engines 1 of 2 alive"), std::string::npos);
}

}  // namespace
}  // namespace headway::serving
