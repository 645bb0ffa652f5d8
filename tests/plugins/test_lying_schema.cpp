// Refused plugins: an option schema that lies in one way each, chosen by LYING_SCHEMA when built
// (tests/plugins/CMakeLists.txt builds one library per way). The SDK's builders do not check
// these; the host must refuse them at load, where they were accepted and then made options that
// could never be set or a `plugin describe` template that is not TOML (helper-164).
#include <headway/plugin.hpp>

#include "stub_scheduler.h"

namespace {

using headway::test_plugins::StubScheduler;
using Adapter = headway::test_plugins::StubAdapter;
using namespace headway::sdk;

#define DUPLICATE_KEY 1
#define QUOTED_KEY 2
#define BOOL_DEFAULT_7 3
#define FRACTIONAL_INT_BOUND 4
#define MIN_ABOVE_MAX 5
#define INT_DEFAULT_PAST_MAX 6

constexpr hw_option_spec lying_option() {
#if LYING_SCHEMA == DUPLICATE_KEY
  return bool_option("n", true, "The same key as the first option.");
#elif LYING_SCHEMA == QUOTED_KEY  // not a lie: a key a TOML file writes quoted
  return int_option("a b.c", 1, 0, 4, "A key a TOML file writes quoted.");
#elif LYING_SCHEMA == BOOL_DEFAULT_7
  hw_option_spec o = bool_option("flag", true, "A bool whose default is 7.");
  o.default_int = 7;
  return o;
#elif LYING_SCHEMA == FRACTIONAL_INT_BOUND
  hw_option_spec o = int_option("count", 1, 0, 2, "An integer whose bounds are not integers.");
  o.min_value = 0.5;
  o.max_value = 1.5;
  return o;
#elif LYING_SCHEMA == MIN_ABOVE_MAX
  hw_option_spec o = int_option("depth", 5, 1, 10, "A range the wrong way round.");
  o.min_value = 10;
  o.max_value = 1;
  return o;
#elif LYING_SCHEMA == INT_DEFAULT_PAST_MAX  // one past a maximum that a double cannot tell from it
  return int_option("seed", (int64_t{1} << 62) + 1, 0, int64_t{1} << 62,
                    "An integer whose default is one past its maximum.");
#else
#error "LYING_SCHEMA names none of the ways"
#endif
}

constexpr hw_option_spec kOptions[] = {
    int_option("n", 5, 0, 10, "A valid option before the lying one."),
    lying_option(),
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(StubScheduler, "org.headway.test.lying_schema", "test_lying_schema",
                         "0.0.1", "An option schema that lies", kOptions)
