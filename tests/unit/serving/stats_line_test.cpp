// stats_line(): the rates of an interval, the load at its end, and silence while idle.
#include <gtest/gtest.h>
#include <headway/serving/stats_line.h>

#include <utility>

#include "grpc/fake_generation_service.h"

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

TEST(StatsSample, KeepsTheFullestEnginesKvUse) {
  EngineSummary prefill;
  prefill.index = 0;
  prefill.kv_blocks_total = 10000;
  prefill.kv_blocks_free = 9900;
  EngineSummary decode;
  decode.index = 1;
  decode.kv_blocks_total = 100;
  decode.kv_blocks_free = 32;
  EngineSummary down = decode;  // an engine that is down counts for nothing
  down.index = 2;
  down.alive = false;
  down.kv_blocks_free = 0;
  testing::FakeGenerationService service;
  ClusterSummary cluster;
  cluster.engines = {prefill, decode, down};
  service.set_cluster(std::move(cluster));
  const StatsSample sample = take_stats_sample(service, 1.0);
  EXPECT_EQ(sample.kv_blocks_used, 168u);
  EXPECT_EQ(sample.kv_blocks_total, 10100u);
  EXPECT_DOUBLE_EQ(sample.fullest_kv_fraction, 0.68);
  EXPECT_EQ(sample.fullest_kv_engine, 1u);
}

// A small decode process behind a large prefill one: the sum read "1.3% used" while the decode
// process was 68% full (helper-163). The fullest engine is named when it stands 10 points above.
TEST(StatsLine, NamesAnEngineWhoseKvCacheIsFarFullerThanTheSum) {
  const StatsSample before = busy_start();
  StatsSample now = before;
  now.seconds = 110.0;
  now.totals.generation_tokens += 10;
  now.kv_blocks_used = 13;
  now.kv_blocks_total = 1000;
  now.fullest_kv_fraction = 0.68;
  now.fullest_kv_engine = 1;
  EXPECT_NE(stats_line(before, now).find("KV cache 1.3% used (engine 1 at 68.0%)"),
            std::string::npos)
      << stats_line(before, now);
  now.fullest_kv_fraction = 0.05;  // within 10 points of the sum: not named
  EXPECT_EQ(stats_line(before, now).find("(engine"), std::string::npos) << stats_line(before, now);
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
