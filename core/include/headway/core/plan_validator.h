// Checks a scheduler's plan before the engine executes anything of it. A plugin is untrusted: an
// invalid plan is rejected with a message naming the rule it breaks and is never executed.
//
// Rules: every slice and preemption names a request of the snapshot; no request appears twice
// (slices and preemptions together); a preemption names a running request; a slice starts at the
// request's computed tokens, has at least one token and no more than it has left, and stays within
// max_model_len; the slices' tokens fit the scheduler's declared budget; the running requests after
// the step fit max_num_seqs; the KV blocks the slices need fit the free blocks plus those released
// by the plan's preemptions.
//
// Threading: a PlanValidator is used by one engine thread; it keeps scratch buffers so that
// validation does not allocate in steady state.
#pragma once

#include <headway/abi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace headway::core {

class PlanValidator {
 public:
  // Returns the first broken rule, or nullopt when the plan is valid.
  std::optional<std::string> validate(const hw_scheduler_snapshot& snapshot,
                                      const hw_scheduler_plan& plan,
                                      const hw_scheduler_limits& limits);

 private:
  struct Entry {
    uint64_t id;
    uint32_t index;  // into running or waiting
    bool running;
  };
  static const Entry* find_sorted(const std::vector<Entry>& index, uint64_t id);

  std::vector<Entry> running_index_;  // sorted by id
  std::vector<Entry> waiting_index_;  // sorted by id, built only when a plan reaches deep
  std::vector<uint64_t> seen_;        // ids in the plan, for duplicate detection
};

}  // namespace headway::core
