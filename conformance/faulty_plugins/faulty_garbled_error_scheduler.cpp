// Faulty on purpose: its first schedule() fails with a status whose message fills the whole buffer
// with no NUL terminator and holds bytes that are not UTF-8, as a hand-written C plugin may. The
// host must read the message within the buffer (not on into its own stack) and replace the bad
// bytes; headway-conformance must still write its report (a JSON writer throws on such bytes).
#include <cstring>
#include <headway/plugin.hpp>

namespace {

class PlainScheduler final : public headway::sdk::StepScheduler {
 public:
  PlainScheduler(const headway::sdk::Host&, const headway::sdk::Options&, const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 512, 64};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {}
};

using Adapter = headway::sdk::SchedulerAdapter<PlainScheduler>;

// The C ABI directly, past the SDK (whose helpers always terminate and never garble a message).
int32_t garbled_schedule(hw_scheduler*, const hw_scheduler_snapshot*, hw_scheduler_plan*,
                         hw_status* status) {
  std::memset(status->message, 'g', sizeof(status->message));
  std::memcpy(status->message, "garbled \xff\xfe", 10);
  status->code = HW_INTERNAL;
  return HW_INTERNAL;
}

constexpr hw_scheduler_table kTable = {sizeof(hw_scheduler_table), Adapter::table.create,
                                       Adapter::table.destroy, Adapter::table.get_limits,
                                       &garbled_schedule};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) {
  static constexpr hw_plugin_descriptor descriptor = {
      sizeof(hw_plugin_descriptor),
      HW_ABI_MAJOR,
      HW_ABI_MINOR,
      HW_KIND_STEP_SCHEDULER,
      headway::sdk::make_str("org.headway.faulty.garbled_error"),
      headway::sdk::make_str("faulty_garbled_error"),
      headway::sdk::make_str("0.0.1"),
      headway::sdk::make_str("Faulty on purpose: an unterminated, non-UTF-8 error message"),
      nullptr,
      0,
      &kTable};
  return &descriptor;
}
