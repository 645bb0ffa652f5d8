// KvHandoff makes the KV transport's calls for every driver thread (and the link threads): one
// slow call (a copy done in start(), a link that waits, an NCCL call) must not make the other
// threads' calls wait, or every decode engine's step waits behind one transfer. abi.h lets any
// thread call a transport instance at any time (the plugin synchronises), so nothing in between
// may serialise them. A hand-written transport in the test, no library: the call of the kind a
// test names waits at a gate while another thread makes an engine driver's calls.
#include "kv_handoff.h"

#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace headway::serving {
namespace {

enum class Call { kNone, kStart, kPoll, kRendezvous, kJoin, kState, kPost, kClose };

const char* name_of(Call call) {
  switch (call) {
    case Call::kNone:
      return "none";
    case Call::kStart:
      return "start";
    case Call::kPoll:
      return "poll";
    case Call::kRendezvous:
      return "peer_rendezvous";
    case Call::kJoin:
      return "peer_join";
    case Call::kState:
      return "peer_state";
    case Call::kPost:
      return "peer_post";
    case Call::kClose:
      return "peer_close";
  }
  return "?";
}

void PrintTo(Call call, std::ostream* out) { *out << name_of(call); }

// The first call of kind `blocking` waits here until the test opens the gate.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  Call blocking = Call::kNone;
  bool entered = false;  // that call is waiting
  bool open = false;
};
Gate g_gate;

void pass_gate(Call call) {
  std::unique_lock lock(g_gate.mutex);
  if (g_gate.blocking != call) return;
  g_gate.blocking = Call::kNone;  // only the first call of the kind waits
  g_gate.entered = true;
  g_gate.changed.notify_all();
  g_gate.changed.wait(lock, [] { return g_gate.open; });
}

std::atomic<uint64_t> g_next_handle{1};

int32_t create(const hw_host_services*, const hw_options*, hw_kv_transport** out, hw_status*) {
  static int handle = 0;
  *out = reinterpret_cast<hw_kv_transport*>(&handle);
  return HW_OK;
}
void destroy(hw_kv_transport*) {}
int32_t start(hw_kv_transport*, const hw_kv_transfer*, uint64_t* handle, hw_status*) {
  pass_gate(Call::kStart);
  *handle = g_next_handle++;
  return HW_OK;
}
int32_t poll(hw_kv_transport*, uint64_t, int32_t* state, double* seconds, hw_status*) {
  pass_gate(Call::kPoll);
  *state = HW_TRANSFER_DONE;
  *seconds = 0.0;
  return HW_OK;
}
int32_t peer_rendezvous(hw_kv_transport*, uint8_t* id, uint64_t capacity, uint64_t* size,
                        hw_status*) {
  pass_gate(Call::kRendezvous);
  if (capacity < 1) return HW_INVALID_ARGUMENT;
  id[0] = 42;
  *size = 1;
  return HW_OK;
}
int32_t peer_join(hw_kv_transport*, const uint8_t*, uint64_t, int32_t, int32_t, int32_t,
                  uint64_t* link, hw_status*) {
  pass_gate(Call::kJoin);
  *link = g_next_handle++;
  return HW_OK;
}
int32_t peer_state(hw_kv_transport*, uint64_t, int32_t* state, hw_status*) {
  pass_gate(Call::kState);
  *state = HW_TRANSFER_DONE;
  return HW_OK;
}
int32_t peer_post(hw_kv_transport*, uint64_t, int32_t, const hw_memory_desc*, const uint32_t*,
                  uint32_t, uint64_t* handle, hw_status*) {
  pass_gate(Call::kPost);
  *handle = g_next_handle++;
  return HW_OK;
}
void peer_close(hw_kv_transport*, uint64_t) { pass_gate(Call::kClose); }

const hw_kv_transport_table kTable{sizeof(hw_kv_transport_table),
                                   &create,
                                   &destroy,
                                   &start,
                                   &poll,
                                   &peer_rendezvous,
                                   &peer_join,
                                   &peer_state,
                                   &peer_post,
                                   &peer_close};
const hw_plugin_descriptor kDescriptor{sizeof(hw_plugin_descriptor),
                                       HW_ABI_MAJOR,
                                       HW_ABI_MINOR,
                                       HW_KIND_KV_TRANSPORT,
                                       {"org.test.gated_transport", 24},
                                       {"gated_transport", 15},
                                       {"0.0.1", 5},
                                       {"", 0},
                                       nullptr,
                                       0,
                                       &kTable};

// How long the engine thread's calls may take while the other call waits: they return at once
// unless something makes them wait for it (then they would wait for ever: the test gives up).
constexpr std::chrono::seconds kBound{10};

class KvHandoffTest : public ::testing::TestWithParam<Call> {
 protected:
  KvHandoffTest() {
    plugin_.descriptor = &kDescriptor;
    choice_.where = "deploy.toml: kv_transport";
    choice_.plugin = &plugin_;
    choice_.options = std::make_shared<const core::PluginOptions>(
        core::PluginOptions::from_toml(kDescriptor, nullptr, "t"));
    transport_ = std::make_unique<core::KvTransportInstance>(choice_, host_);
    handoff_ = std::make_unique<KvHandoff>(*transport_);
    std::lock_guard lock(g_gate.mutex);
    g_gate.blocking = Call::kNone;
    g_gate.entered = false;
    g_gate.open = false;
  }

  // Makes one call of kind `call` through the hand-off.
  void make(Call call) {
    switch (call) {
      case Call::kNone:
        break;
      case Call::kStart:
        handoff_->start(transfer_);
        break;
      case Call::kPoll:
        handoff_->poll(1);
        break;
      case Call::kRendezvous:
        handoff_->peer_rendezvous();
        break;
      case Call::kJoin:
        handoff_->peer_join({42}, 1, memory_);
        break;
      case Call::kState:
        handoff_->peer_state(1);
        break;
      case Call::kPost:
        handoff_->peer_post(1, HW_PEER_RECEIVE, memory_, blocks_);
        break;
      case Call::kClose:
        handoff_->peer_close(1);
        break;
    }
  }

  core::VirtualClock clock_;
  core::HostServices host_{"kv_transport gated_transport", &clock_};
  core::LoadedPlugin plugin_;
  core::PluginChoice choice_;
  std::unique_ptr<core::KvTransportInstance> transport_;
  std::unique_ptr<KvHandoff> handoff_;
  std::array<uint32_t, 2> blocks_{0, 1};
  hw_memory_desc memory_{nullptr, 0, HW_MEMORY_NONE, -1, 16, 16};
  hw_kv_transfer transfer_{sizeof(hw_kv_transfer), 7, memory_, memory_, blocks_.data(),
                           blocks_.data(),         2, 0,       1};
};

TEST_P(KvHandoffTest, AnEngineThreadsCallsDoNotWaitForASlowTransportCall) {
  const Call slow = GetParam();
  {
    std::lock_guard lock(g_gate.mutex);
    g_gate.blocking = slow;
  }
  std::thread slow_thread([&] { make(slow); });
  bool entered = false;
  {
    std::unique_lock lock(g_gate.mutex);
    entered = g_gate.changed.wait_for(lock, kBound * 6, [] { return g_gate.entered; });
  }

  // A decode engine's driver in its step loop: starts the copy of an arriving request's KV and
  // polls it (EngineDriver::start_arrivals, finish_arrivals).
  std::mutex done_mutex;
  std::condition_variable done_changed;
  bool done = false;
  int32_t state = HW_TRANSFER_FAILED;
  std::thread engine_thread([&] {
    const uint64_t handle = handoff_->start(transfer_);
    const int32_t polled = handoff_->poll(handle).state;
    std::lock_guard lock(done_mutex);
    state = polled;
    done = true;
    done_changed.notify_all();
  });
  bool finished = false;
  if (entered) {
    std::unique_lock lock(done_mutex);
    finished = done_changed.wait_for(lock, kBound, [&] { return done; });
  }

  {
    std::lock_guard lock(g_gate.mutex);
    g_gate.open = true;
  }
  g_gate.changed.notify_all();
  slow_thread.join();
  engine_thread.join();
  ASSERT_TRUE(entered) << "the transport's " << name_of(slow) << "() was never called";
  EXPECT_TRUE(finished) << "an engine thread's start()/poll() through KvHandoff waited "
                        << kBound.count() << " s for the transport's " << name_of(slow)
                        << "() in another thread to return (a lock held across transport calls)";
  EXPECT_EQ(state, HW_TRANSFER_DONE);
}

INSTANTIATE_TEST_SUITE_P(EveryTransportCall, KvHandoffTest,
                         ::testing::Values(Call::kStart, Call::kPoll, Call::kRendezvous,
                                           Call::kJoin, Call::kState, Call::kPost, Call::kClose),
                         [](const ::testing::TestParamInfo<Call>& info) {
                           std::string name = name_of(info.param);
                           name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
                           return name;
                         });

}  // namespace
}  // namespace headway::serving
