// Each deliberately faulty plugin is reported non-conformant, on the test that targets its fault.
#include <gtest/gtest.h>

#include "suite_runner.h"

namespace {

using headway::conformance::Outcome;

headway::conformance::ProfileResult run_faulty(const std::string& file) {
  return headway::test::run_suite(std::string(HEADWAY_FAULTY_PLUGIN_DIR) + "/" + file);
}

void expect_outcome(const headway::conformance::ProfileResult& r, const std::string& id,
                    Outcome outcome) {
  const auto* t = headway::test::find_test(r, id);
  ASSERT_NE(t, nullptr) << id << " did not run\n" << headway::test::describe(r);
  EXPECT_EQ(t->outcome, outcome) << id << "\n" << headway::test::describe(r);
}

TEST(FaultyPlugins, OverBudgetSchedulerFailsPlanValidity) {
  const auto r = run_faulty("faulty_over_budget_scheduler.so");
  EXPECT_FALSE(r.conformant());
  expect_outcome(r, "scheduler.plans_valid", Outcome::kFail);
  EXPECT_NE(headway::test::find_test(r, "scheduler.plans_valid")->message.find("over the budget"),
            std::string::npos);
}

TEST(FaultyPlugins, StarvingSchedulerFailsOnlyStarvation) {
  const auto r = run_faulty("faulty_starving_scheduler.so");
  EXPECT_FALSE(r.conformant());
  expect_outcome(r, "scheduler.no_starvation", Outcome::kFail);
  // Its plans are valid and everything finishes: only the starvation rule can catch it.
  expect_outcome(r, "scheduler.plans_valid", Outcome::kPass);
  expect_outcome(r, "scheduler.all_finish", Outcome::kPass);
}

TEST(FaultyPlugins, CorruptingTransportFailsRoundTrips) {
  const auto r = run_faulty("faulty_corrupting_transport.so");
  EXPECT_FALSE(r.conformant());
  for (const char* id : {"kv.one_block", "kv.many_blocks", "kv.non_contiguous", "kv.concurrent"}) {
    expect_outcome(r, id, Outcome::kFail);
  }
  expect_outcome(r, "kv.failure_reported", Outcome::kPass);
}

TEST(FaultyPlugins, BatchDependentModelFailsBatchInvariance) {
  const auto r = run_faulty("faulty_batch_dependent_model.so");
  EXPECT_FALSE(r.conformant());
  expect_outcome(r, "model.batch_invariance", Outcome::kFail);
  expect_outcome(r, "model.chunking_invariance", Outcome::kPass);
}

}  // namespace
