// Refused plugin: the default of its enum option is not among the option's allowed values. The SDK
// builders cannot catch this at compile time; the host must at load time.
#include <headway/plugin.hpp>

namespace {

class StubScheduler final : public headway::sdk::StepScheduler {
 public:
  StubScheduler(const headway::sdk::Host&, const headway::sdk::Options&, const hw_engine_facts&) {}
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 16, 1};
  }
  void schedule(const hw_scheduler_snapshot&, headway::sdk::PlanWriter&) override {}
};

using Adapter = headway::sdk::SchedulerAdapter<StubScheduler>;

constexpr hw_str kModes[] = {headway::sdk::make_str("fast"), headway::sdk::make_str("slow")};

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("depth", 4, 1, 16, "A valid option before the broken one."),
    headway::sdk::enum_option("mode", "medium", kModes, "Default 'medium' is not allowed."),
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(StubScheduler, "org.headway.test.bad_schema", "test_bad_schema", "0.0.1",
                         "Enum option default outside its allowed values", kOptions)
