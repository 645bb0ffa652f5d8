// Faulty on purpose, as a C author might be: a hand-written C table (no SDK adapter) whose
// schedule() plans as the SDK template does and then ends its slices with a zeroed terminator
// entry, a C habit. When every request gets a slice, the terminator lands one entry past
// slice_capacity, in memory the host did not lend. The engine's guard entry catches it: the suite
// must report scheduler.plans_valid as FAIL, naming the write.
#include <headway/abi.h>

#include "template_fcfs.h"

namespace {

constexpr uint32_t kBudget = 2048;
constexpr uint32_t kMaxSeqs = 64;

struct State {
  int unused = 0;
};

int32_t create(const hw_host_services*, const hw_options*, const hw_engine_facts*,
               hw_scheduler** out, hw_status*) {
  *out = reinterpret_cast<hw_scheduler*>(new State());
  return HW_OK;
}
void destroy(hw_scheduler* s) { delete reinterpret_cast<State*>(s); }
int32_t get_limits(hw_scheduler*, hw_scheduler_limits* limits, hw_status*) {
  *limits = hw_scheduler_limits{sizeof(hw_scheduler_limits), kBudget, kMaxSeqs};
  return HW_OK;
}
int32_t schedule(hw_scheduler*, const hw_scheduler_snapshot* s, hw_scheduler_plan* plan,
                 hw_status*) {
  headway::sdk::PlanWriter writer(plan);
  headway::faulty::plan_template_fcfs(*s, writer, kBudget, kMaxSeqs);
  plan->slices[plan->slice_count] = hw_slice{0, 0, 0};  // the fault: may be past the capacity
  return HW_OK;
}

const hw_scheduler_table kTable = {sizeof(hw_scheduler_table), &create, &destroy, &get_limits,
                                   &schedule};

const hw_plugin_descriptor kDescriptor = {
    sizeof(hw_plugin_descriptor),
    HW_ABI_MAJOR,
    HW_ABI_MINOR,
    HW_KIND_STEP_SCHEDULER,
    HW_STR_LITERAL("org.headway.faulty.terminated_plan"),
    HW_STR_LITERAL("faulty_terminated_plan"),
    HW_STR_LITERAL("0.0.1"),
    HW_STR_LITERAL("Faulty on purpose: writes a terminator entry past its plan's slices"),
    nullptr,
    0,
    &kTable};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry() { return &kDescriptor; }
