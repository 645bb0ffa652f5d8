// A valid plugin whose constructor throws, to prove that the SDK's exception firewall turns every
// C++ exception into a status and none crosses the C boundary. The option `mode` picks what is
// thrown: a std::runtime_error (-> HW_INTERNAL with its message), a headway::sdk::Error (-> its own
// code and message) or a non-std exception (-> HW_INTERNAL, generic message).
#include <headway/plugin.hpp>
#include <stdexcept>
#include <string>

namespace {

using namespace headway::sdk;

constexpr hw_str kModes[] = {make_str("runtime_error"), make_str("sdk_error"), make_str("int"),
                             make_str("none")};

constexpr hw_option_spec kOptions[] = {
    enum_option("mode", "runtime_error", kModes, "What create() throws."),
};

class ThrowingScheduler final : public StepScheduler {
 public:
  ThrowingScheduler(const Host&, const Options& options, const hw_engine_facts&) {
    const std::string mode = options.get_string("mode");
    if (mode == "runtime_error") {
      throw std::runtime_error("test_throwing_scheduler: create failed on purpose");
    }
    if (mode == "sdk_error") {
      throw Error(HW_RESOURCE_EXHAUSTED, "test_throwing_scheduler: out of widgets");
    }
    if (mode == "int") throw 42;
  }
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 16, 1};
  }
  void schedule(const hw_scheduler_snapshot&, PlanWriter&) override {
    throw std::logic_error("test_throwing_scheduler: schedule failed on purpose");
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(ThrowingScheduler, "org.headway.test.throwing_scheduler", "test_throwing",
                         "0.0.1", "Scheduler whose create() throws", kOptions)
