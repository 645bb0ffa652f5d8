// One instance of the scheduler under test, fed snapshots the suite builds by hand rather than by
// an engine, for the measurements that call schedule() thousands of times (step cost, per-request
// heap): without an engine in the loop, the suite allocates nothing between calls and the heap and
// time measured are the plugin's own.
//
// Ownership: owns the instance, its host services and the plan's arrays. Threading: one thread.
#pragma once

#include <headway/abi.h>
#include <headway/conformance/suite.h>
#include <headway/core/clock.h>
#include <headway/core/host_services.h>
#include <headway/core/plan_arrays.h>
#include <headway/core/plugin_instances.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace headway::conformance {

class MeasuredScheduler {
 public:
  static constexpr uint32_t kBlockSize = 16;

  // Creates the instance with room for `running` requests when the plugin has the usual
  // max_num_seqs option and the user did not set it, and plan arrays for up to `running` +
  // `waiting` requests. Throws core::Error when the plugin refuses to be created.
  MeasuredScheduler(const PluginUnderTest& plugin, uint32_t running, uint32_t waiting);

  const hw_scheduler_limits& limits() const { return scheduler_->limits(); }
  const hw_engine_facts& facts() const { return facts_; }
  core::VirtualClock& clock() { return clock_; }

  struct Step {
    hw_scheduler_snapshot snapshot;
    hw_scheduler_plan plan;  // points into this object's arrays until the next call
  };
  // Plans step `step` on the given queues (borrowed for the call), with `blocks_used` of the KV
  // cache held. Throws core::Error when the scheduler fails; the plan is not validated here.
  //
  // With `writes`, also says there what the scheduler changed in the snapshot it borrowed
  // read-only ("waiting[3] (request 100003): priority 0 -> -1"), or "" when nothing: the engine
  // hands a scheduler its own queue of waiting requests, so a write there (an in-place sort, a
  // mark) changes the engine's state behind its back. That copies the queues: not for timed loops.
  Step plan(uint64_t step, std::span<const hw_request_view> running,
            std::span<const hw_request_view> waiting, uint32_t blocks_used,
            std::string* writes = nullptr);

 private:
  hw_scheduler_snapshot snapshot(uint64_t step, std::span<const hw_request_view> running,
                                 std::span<const hw_request_view> waiting,
                                 uint32_t blocks_used) const;
  hw_engine_facts facts_;
  // Starts late, as on a server that has run a while: every request the snapshots hold arrived
  // before `now` (a plugin computing ages must not see a negative one).
  core::VirtualClock clock_{1000.0};
  core::HostServices host_;
  std::unique_ptr<core::SchedulerInstance> scheduler_;
  core::PlanArrays plan_arrays_;
  uint32_t slice_room_;  // the plan's capacities at most (allocated by the constructor)
  uint32_t preempted_room_;
  std::vector<hw_request_view> running_before_, waiting_before_;  // for plan(..., writes)
};

}  // namespace headway::conformance
