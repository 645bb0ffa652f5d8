// PlanArrays: the arrays a step scheduler fills (hw_scheduler_plan's slices and preempted ids),
// each with a guard entry past its capacity (GuardedBuffer), so that a scheduler writing past a
// capacity is named instead of corrupting the host's heap. The engine and the conformance suite's
// measured calls plan through it.
//
// Header-only. Ownership: owns the arrays; a plan it returns points into them until the next
// plan(). Threading: one thread.
#pragma once

#include <headway/abi.h>
#include <headway/core/guarded_buffer.h>

#include <cstdint>
#include <optional>
#include <string>

namespace headway::core {

class PlanArrays {
 public:
  // An empty plan over arrays of these capacities, guards set. Allocates only for capacities
  // larger than any before.
  hw_scheduler_plan plan(uint32_t slice_capacity, uint32_t preempted_capacity) {
    return hw_scheduler_plan{sizeof(hw_scheduler_plan),
                             slices_.prepare(slice_capacity),
                             slice_capacity,
                             0,
                             preempted_.prepare(preempted_capacity),
                             preempted_capacity,
                             0};
  }
  // After the scheduler filled the last plan(): which array it wrote past, "slices (entry 12, its
  // capacity)", or nothing.
  std::optional<std::string> overrun() const {
    if (!slices_.guard_intact()) return past("slices", slices_.capacity());
    if (!preempted_.guard_intact()) return past("preempted ids", preempted_.capacity());
    return std::nullopt;
  }

 private:
  static std::string past(const char* array, size_t capacity) {
    return std::string(array) + " (entry " + std::to_string(capacity) + ", its capacity)";
  }
  GuardedBuffer<hw_slice> slices_;
  GuardedBuffer<uint64_t> preempted_;
};

}  // namespace headway::core
