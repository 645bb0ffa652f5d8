// A scheduler with a hand-written C table (no SDK adapter, so no exception firewall) whose
// schedule() lets a C++ exception out through the C ABI: the host must turn it into an error that
// names the plugin and the function instead of letting it unwind through the engine.
#include <headway/abi.h>

#include <stdexcept>

namespace {

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
  *limits = hw_scheduler_limits{sizeof(hw_scheduler_limits), 64, 4};
  return HW_OK;
}
int32_t schedule(hw_scheduler*, const hw_scheduler_snapshot*, hw_scheduler_plan*, hw_status*) {
  throw std::runtime_error("test_raw_throwing: thrown through the C ABI");
}

const hw_scheduler_table kTable = {sizeof(hw_scheduler_table), &create, &destroy, &get_limits,
                                   &schedule};

constexpr hw_str str(const char* s, uint64_t n) { return hw_str{s, n}; }

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR,
                                          HW_ABI_MINOR,
                                          HW_KIND_STEP_SCHEDULER,
                                          str("org.headway.test.raw_throwing", 29),
                                          str("test_raw_throwing", 17),
                                          str("0.0.1", 5),
                                          str("Throws through the C ABI", 24),
                                          nullptr,
                                          0,
                                          &kTable};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
