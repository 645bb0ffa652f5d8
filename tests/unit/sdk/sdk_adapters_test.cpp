// The adapters that turn a plugin's C++ class into its C table: what they promise the class about
// the objects its constructor receives.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <headway/plugin.hpp>
#include <span>

namespace headway::sdk {
namespace {

int g_logged = 0;
void count_log(void* context, int32_t, hw_str) { ++*static_cast<int*>(context); }

// Keeps the Host by reference, as the header's own example signature invites.
class KeepsHostByReference final : public StepScheduler {
 public:
  KeepsHostByReference(const Host& host, const Options&, const hw_engine_facts&) : host_(host) {}
  hw_scheduler_limits limits() const override {
    host_.log(HW_LOG_INFO, "limits");
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), 1, 1};
  }
  void schedule(const hw_scheduler_snapshot&, PlanWriter&) override {
    host_.log(HW_LOG_INFO, "schedule");
  }

 private:
  const Host& host_;
};

// Overwrites the stack where create()'s frame was, so that anything left pointing into it reads
// garbage instead of the value that happened to stay there.
__attribute__((noinline)) void clobber_stack() {
  volatile unsigned char junk[16384];
  for (size_t i = 0; i < sizeof(junk); ++i) junk[i] = 0xA5;
}

TEST(SdkAdapters, AHostKeptByReferenceStaysValidForTheInstancesLife) {
  using Adapter = SchedulerAdapter<KeepsHostByReference>;
  hw_host_services services{};
  services.struct_size = sizeof(services);
  services.context = &g_logged;
  services.log = &count_log;
  const hw_engine_facts facts{sizeof(hw_engine_facts), 16, 1024, 4096};
  hw_scheduler* scheduler = nullptr;
  hw_status status{};
  ASSERT_EQ(Adapter::table.create(&services, nullptr, &facts, &scheduler, &status), HW_OK)
      << status.message;
  clobber_stack();
  hw_scheduler_limits limits{};
  ASSERT_EQ(Adapter::table.get_limits(scheduler, &limits, &status), HW_OK) << status.message;
  hw_scheduler_snapshot snapshot{};
  hw_scheduler_plan plan{};
  plan.struct_size = sizeof(plan);
  clobber_stack();
  ASSERT_EQ(Adapter::table.schedule(scheduler, &snapshot, &plan, &status), HW_OK) << status.message;
  EXPECT_EQ(g_logged, 2);
  Adapter::table.destroy(scheduler);
}

// The exception firewall: an sdk::Error keeps its code, except HW_OK, which would return success
// from a call that failed (a transport's start() with no handle set) and so becomes HW_INTERNAL.
TEST(SdkAdapters, TheFirewallNeverReturnsSuccessForAThrownError) {
  hw_status status{};
  EXPECT_EQ(headway::sdk::guarded(
                &status, [] { throw headway::sdk::Error(HW_NOT_FOUND, "no such handle"); }),
            HW_NOT_FOUND);
  EXPECT_STREQ(status.message, "no such handle");
  EXPECT_EQ(headway::sdk::guarded(&status, [] { throw headway::sdk::Error(HW_OK, "oops"); }),
            HW_INTERNAL);
  EXPECT_EQ(status.code, HW_INTERNAL);
  EXPECT_STREQ(status.message, "sdk::Error thrown with HW_OK: oops");
  EXPECT_EQ(headway::sdk::guarded(&status, [] {}), HW_OK);
}

// Places on the first live engine with room (has_room), else on engine 0.
class FirstWithRoom final : public Router {
 public:
  FirstWithRoom(const Host&, const Options&, std::span<const hw_engine_load>) {}
  hw_route_decision route(const hw_route_request&,
                          std::span<const hw_engine_load> engines) override {
    uint32_t chosen = 0;
    for (const hw_engine_load& e : engines) {
      if (e.alive && has_room(e)) {
        chosen = e.engine_index;
        break;
      }
    }
    return hw_route_decision{sizeof(hw_route_decision), chosen, chosen, 0};
  }
};

// A later host's hw_engine_limits, with a field appended: the adapter steps through the array by
// the host's struct_size (abi.h), not by its own sizeof, and reads each engine's bound.
TEST(SdkAdapters, EngineLimitsAreReadByTheHostsStructSize) {
  using Adapter = RouterAdapter<FirstWithRoom>;
  struct LaterLimits {
    hw_engine_limits limits;
    uint64_t appended;
  };
  const LaterLimits later[3] = {{{sizeof(LaterLimits), 0, 2}, ~0ull},
                                {{sizeof(LaterLimits), 1, 5}, ~0ull},
                                {{sizeof(LaterLimits), 2, 0}, ~0ull}};
  hw_host_services services{};
  services.struct_size = sizeof(services);
  hw_engine_load engines[3] = {};
  for (uint32_t e = 0; e < 3; ++e) {
    engines[e].engine_index = e;
    engines[e].alive = 1;
  }
  hw_router* router = nullptr;
  hw_status status{};
  ASSERT_EQ(Adapter::table.create(&services, nullptr, engines, 3, &router, &status), HW_OK)
      << status.message;
  ASSERT_EQ(Adapter::table.set_engine_limits(router, &later[0].limits, 3, &status), HW_OK)
      << status.message;
  const hw_route_request request{1, 8, 8, 0, hw_str{"", 0}};
  hw_route_decision decision{};
  const auto routed = [&] {
    EXPECT_EQ(Adapter::table.route(router, &request, engines, 3, &decision, &status), HW_OK);
    return decision.prefill_engine;
  };
  // Engine 0 full (2 of 2), engine 1 with room (4 of 5): read by sizeof, engine 1's bound would
  // be the appended field's bytes and engine 2's struct_size.
  engines[0].waiting = 2;
  engines[1].waiting = 4;
  EXPECT_EQ(routed(), 1u);
  engines[1].waiting = 5;  // full too: engine 2 is unbounded
  engines[2].waiting = 1000;
  EXPECT_EQ(routed(), 2u);
  Adapter::table.destroy(router);
}

TEST(SdkAdapters, MakeStrOfNullIsTheEmptyString) {
  const hw_str s = make_str(nullptr);
  EXPECT_EQ(s.size, 0u);
  EXPECT_EQ(view(s), "");
  const hw_option_spec spec = string_option("label", nullptr, "no default");
  EXPECT_EQ(spec.default_string.size, 0u);
}

// The host passes every declared option with its declared type, so reading a key the schema
// lacks, or reading one with another getter, is the plugin's bug: HW_INTERNAL naming the key and
// the types, which headway-conformance reports as a failure instead of asking for --options.
TEST(SdkOptions, KeysOutsideTheSchemaAndWrongGettersAreThePluginsBug) {
  const hw_option_value values[] = {
      {make_str("max_num_seqs"), HW_OPTION_INT, 64, 0.0, make_str("")},
      {make_str("policy"), HW_OPTION_ENUM, 0, 0.0, make_str("fcfs")}};
  const hw_options options{values, 2};
  const Options o(&options);
  EXPECT_EQ(o.get_int("max_num_seqs"), 64);
  EXPECT_EQ(o.get_string("policy"), "fcfs");
  const auto refusal = [&](auto&& read) {
    try {
      read();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), HW_INTERNAL);
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error";
    return std::string();
  };
  EXPECT_EQ(refusal([&] { (void)o.get_int("max_num_seq"); }),
            "option 'max_num_seq' is not in the plugin's schema (its descriptor's options); the "
            "plugin reads a key it does not declare");
  EXPECT_EQ(refusal([&] { (void)o.get_bool("max_num_seqs"); }),
            "option 'max_num_seqs' is declared as an integer but the plugin reads it as a boolean");
  EXPECT_EQ(refusal([&] { (void)o.get_string("max_num_seqs"); }),
            "option 'max_num_seqs' is declared as an integer but the plugin reads it as a string");
}

// A request scheduled twice (or one the snapshot does not hold) overflows the plan arrays first:
// the message said "more slices than requests", which pointed away from the bug (helper-164).
TEST(SdkPlanWriter, AnOverflowSaysWhichRequestAndWhatLikelyCausedIt) {
  hw_slice slices[1];
  uint64_t preempted[1];
  hw_scheduler_plan plan{};
  plan.slices = slices;
  plan.slice_capacity = 1;
  plan.preempted = preempted;
  plan.preempted_capacity = 1;
  PlanWriter writer(&plan);
  hw_request_view request{};
  request.id = 42;
  writer.add_slice(request, 1);
  try {
    writer.add_slice(request, 1);
    FAIL() << "a second slice fit a capacity of one";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), HW_INTERNAL);
    EXPECT_NE(std::string(e.what()).find("request 42 is slice #1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scheduled twice"), std::string::npos) << e.what();
  }
  writer.preempt(7);
  try {
    writer.preempt(7);
    FAIL() << "a second preemption fit a capacity of one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(request 7)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(plan.slice_count, 1u);
  EXPECT_EQ(plan.preempted_count, 1u);
}

}  // namespace
}  // namespace headway::sdk
