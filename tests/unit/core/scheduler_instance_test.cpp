// What the host checks of a scheduler before an engine relies on it (SchedulerInstance): limits
// whose struct_size covers nothing (a hand-written C table that did not set it), and a create()
// that returned HW_OK without a handle. A hand-written table in the test, no library.
#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>

#include <memory>
#include <string>

namespace headway::core {
namespace {

// What the table's functions answer: set by each test before it creates the instance.
hw_scheduler_limits g_limits{};
bool g_create_sets_handle = true;
int g_destroyed = 0;

int32_t create(const hw_host_services*, const hw_options*, const hw_engine_facts*,
               hw_scheduler** out, hw_status*) {
  static int handle = 0;
  if (g_create_sets_handle) *out = reinterpret_cast<hw_scheduler*>(&handle);
  return HW_OK;
}
void destroy(hw_scheduler*) { ++g_destroyed; }
int32_t get_limits(hw_scheduler*, hw_scheduler_limits* limits, hw_status*) {
  *limits = g_limits;
  return HW_OK;
}
int32_t schedule(hw_scheduler*, const hw_scheduler_snapshot*, hw_scheduler_plan*, hw_status*) {
  return HW_OK;
}

const hw_scheduler_table kTable{sizeof(hw_scheduler_table), &create, &destroy, &get_limits,
                                &schedule};
const hw_plugin_descriptor kDescriptor{sizeof(hw_plugin_descriptor),
                                       HW_ABI_MAJOR,
                                       HW_ABI_MINOR,
                                       HW_KIND_STEP_SCHEDULER,
                                       {"org.test.hand_scheduler", 23},
                                       {"hand_scheduler", 14},
                                       {"0.0.1", 5},
                                       {"", 0},
                                       nullptr,
                                       0,
                                       &kTable};

class SchedulerInstanceTest : public ::testing::Test {
 protected:
  SchedulerInstanceTest() {
    plugin_.descriptor = &kDescriptor;
    choice_.where = "deploy.toml: scheduler";
    choice_.plugin = &plugin_;
    choice_.options =
        std::make_shared<const PluginOptions>(PluginOptions::from_toml(kDescriptor, nullptr, "t"));
    g_limits = hw_scheduler_limits{sizeof(hw_scheduler_limits), 256, 8};
    g_create_sets_handle = true;
    g_destroyed = 0;
  }
  std::unique_ptr<SchedulerInstance> make() {
    return std::make_unique<SchedulerInstance>(choice_, facts_, host_);
  }
  // The message make() throws, or a failure.
  std::string refusal() {
    try {
      make();
    } catch (const PluginContractError& e) {
      EXPECT_EQ(e.code(), HW_INTERNAL);
      return e.what();
    }
    ADD_FAILURE() << "the scheduler was taken";
    return {};
  }

  VirtualClock clock_;
  HostServices host_{"engine0 scheduler hand_scheduler", &clock_};
  hw_engine_facts facts_{sizeof(hw_engine_facts), 16, 1024, 4096, HW_ENGINE_ROLE_MIXED};
  LoadedPlugin plugin_;
  PluginChoice choice_;
};

TEST_F(SchedulerInstanceTest, LimitsWhoseStructSizeCoversNothingAreRefused) {
  EXPECT_EQ(make()->limits().max_num_seqs, 8u);
  EXPECT_EQ(g_destroyed, 1);
  // The budget and the sequence count are filled, but the plugin did not say it filled them.
  g_limits.struct_size = 0;
  EXPECT_EQ(refusal(),
            "deploy.toml: scheduler: scheduler 'hand_scheduler' get_limits: struct_size 0 is "
            "smaller than ABI 1.0's 12-byte hw_scheduler_limits (set it to "
            "sizeof(hw_scheduler_limits))");
  EXPECT_EQ(g_destroyed, 2);  // the instance created before the refusal is not leaked
}

TEST_F(SchedulerInstanceTest, ACreateThatSetsNoHandleIsRefused) {
  g_create_sets_handle = false;
  EXPECT_EQ(refusal(),
            "deploy.toml: scheduler: scheduler 'hand_scheduler' create: returned HW_OK but left "
            "the handle (*out) NULL; create() must set it to the instance every later call "
            "receives");
  EXPECT_EQ(g_destroyed, 0);
}

}  // namespace
}  // namespace headway::core
