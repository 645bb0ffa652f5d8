// A hand-written C table whose schedule() fails with a status message that fills the whole buffer
// with no NUL terminator and holds bytes that are not UTF-8 (the SDK's helpers never write such a
// message; a C plugin may). The host must read the message within the buffer, not on into its own
// stack, and replace the bad bytes; headway-conformance must still report the failure and write its
// JSON report (whose writer throws on such bytes).
#include <cstring>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubAdapter;

int32_t garbled_schedule(hw_scheduler*, const hw_scheduler_snapshot*, hw_scheduler_plan*,
                         hw_status* status) {
  std::memset(status->message, 'g', sizeof(status->message));
  std::memcpy(status->message, "garbled \xff\xfe", 10);
  status->code = HW_INTERNAL;
  return HW_INTERNAL;
}

constexpr hw_scheduler_table kTable = {sizeof(hw_scheduler_table), StubAdapter::table.create,
                                       StubAdapter::table.destroy, StubAdapter::table.get_limits,
                                       &garbled_schedule};

constexpr hw_plugin_descriptor kDescriptor = {
    sizeof(hw_plugin_descriptor),
    HW_ABI_MAJOR,
    HW_ABI_MINOR,
    HW_KIND_STEP_SCHEDULER,
    headway::sdk::make_str("org.headway.test.garbled_error"),
    headway::sdk::make_str("test_garbled_error"),
    headway::sdk::make_str("0.0.1"),
    headway::sdk::make_str("Fails with an unterminated error message that is not UTF-8"),
    nullptr,
    0,
    &kTable};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
