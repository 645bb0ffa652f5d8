// Refused plugin: the default of its enum option is not among the option's allowed values. The SDK
// builders cannot catch this at compile time; the host must at load time.
#include <headway/plugin.hpp>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubScheduler;
using Adapter = headway::test_plugins::StubAdapter;

constexpr hw_str kModes[] = {headway::sdk::make_str("fast"), headway::sdk::make_str("slow")};

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("depth", 4, 1, 16, "A valid option before the broken one."),
    headway::sdk::enum_option("mode", "medium", kModes, "Default 'medium' is not allowed."),
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(StubScheduler, "org.headway.test.bad_schema", "test_bad_schema", "0.0.1",
                         "Enum option default outside its allowed values", kOptions)
