// The do-nothing step scheduler behind the test plugins that are broken in their descriptor or
// table, not in their behaviour: each .so defines its own (hand-written) descriptor around it.
//
// Ownership/threading: as any SDK scheduler; header-only, one copy per test plugin.
#pragma once

#include <headway/plugin.hpp>

namespace headway::test_plugins {

class StubScheduler final : public headway::sdk::StepScheduler {
 public:
  StubScheduler(const headway::sdk::Host&, const headway::sdk::Options&, const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 16, 1};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {}
};

using StubAdapter = headway::sdk::SchedulerAdapter<StubScheduler>;

}  // namespace headway::test_plugins
