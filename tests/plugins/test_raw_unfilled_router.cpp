// A router with a hand-written C table (no SDK adapter, which would set struct_size) whose route()
// returns HW_OK without filling the decision, as a careless C plugin may: the host must refuse the
// decision (struct_size 0) as a contract error, not send the request to engine 0 as its zeroes say.
#include <headway/abi.h>

namespace {

struct State {
  int unused = 0;
};

int32_t create(const hw_host_services*, const hw_options*, const hw_engine_load*, uint32_t,
               hw_router** out, hw_status*) {
  *out = reinterpret_cast<hw_router*>(new State());
  return HW_OK;
}
void destroy(hw_router* r) { delete reinterpret_cast<State*>(r); }
int32_t route(hw_router*, const hw_route_request*, const hw_engine_load*, uint32_t,
              hw_route_decision*, hw_status*) {
  return HW_OK;  // the fault: *decision left as the host passed it
}

const hw_router_table kTable = {sizeof(hw_router_table), &create, &destroy, &route};

constexpr hw_str str(const char* s, uint64_t n) { return hw_str{s, n}; }

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR,
                                          HW_ABI_MINOR,
                                          HW_KIND_ROUTER,
                                          str("org.headway.test.raw_unfilled_router", 36),
                                          str("test_raw_unfilled_router", 24),
                                          str("0.0.1", 5),
                                          str("Returns HW_OK without a decision", 32),
                                          nullptr,
                                          0,
                                          &kTable};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
