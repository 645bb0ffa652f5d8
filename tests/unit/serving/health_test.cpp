// A deployment's health from its admission and its engines' roles and liveness.
#include <gtest/gtest.h>
#include <headway/serving/generation_service.h>

namespace {

using headway::serving::EngineHealth;
using headway::serving::kStuckStepSeconds;
using headway::serving::summarize_health;

TEST(Health, ALiveMixedEngineServes) {
  const auto h =
      summarize_health(true, {{HW_ENGINE_ROLE_MIXED, true}, {HW_ENGINE_ROLE_MIXED, false}});
  EXPECT_TRUE(h.serving);
  EXPECT_EQ(h.engines_alive, 1u);
  EXPECT_EQ(h.engines_total, 2u);
  EXPECT_EQ(h.reason, "");
}

// Every request would be refused with "no live decode engine": /health must not say ok.
TEST(Health, LivePrefillEnginesAloneDoNotServe) {
  const auto h =
      summarize_health(true, {{HW_ENGINE_ROLE_PREFILL, true}, {HW_ENGINE_ROLE_DECODE, false}});
  EXPECT_FALSE(h.serving);
  EXPECT_EQ(h.engines_alive, 1u);
  EXPECT_EQ(h.reason,
            "no decode engine is alive (1 of 2 engines alive, all of them prefill engines, which "
            "cannot finish a request)");
}

// With no prefill engine, the decode engines prefill locally.
TEST(Health, ALiveDecodeEngineServesWithoutPrefillEngines) {
  const auto h =
      summarize_health(true, {{HW_ENGINE_ROLE_PREFILL, false}, {HW_ENGINE_ROLE_DECODE, true}});
  EXPECT_TRUE(h.serving);
}

// A step that has not returned for kStuckStepSeconds (a hung forward()) takes its engine out of
// what serves, naming it; a long step below that does not.
TEST(Health, AnEngineStuckInOneStepDoesNotServe) {
  const auto stuck =
      summarize_health(true, {{HW_ENGINE_ROLE_MIXED, true, kStuckStepSeconds + 10.0}});
  EXPECT_FALSE(stuck.serving);
  EXPECT_EQ(stuck.engines_alive, 0u);
  EXPECT_EQ(stuck.reason,
            "no engine can finish a request: engine 0 (in one step for 130 s) stuck, a model or "
            "scheduler call that has not returned for over 120 s");
  const auto other = summarize_health(
      true, {{HW_ENGINE_ROLE_MIXED, true, kStuckStepSeconds}, {HW_ENGINE_ROLE_MIXED, true, 5.0}});
  EXPECT_TRUE(other.serving);
  EXPECT_EQ(other.engines_alive, 1u);
  EXPECT_TRUE(
      summarize_health(true, {{HW_ENGINE_ROLE_MIXED, true, kStuckStepSeconds - 1.0}}).serving);
}

TEST(Health, NoEngineAliveAndDrainingSayWhy) {
  EXPECT_EQ(summarize_health(true, {{HW_ENGINE_ROLE_MIXED, false}}).reason,
            "no engine is alive (0 of 1)");
  const auto draining = summarize_health(false, {{HW_ENGINE_ROLE_MIXED, true}});
  EXPECT_FALSE(draining.serving);
  EXPECT_EQ(draining.reason, "draining: no new requests are admitted");
}

}  // namespace
