#include "peer_link_checks.h"

#include <fmt/format.h>
#include <headway/conformance/test_recorder.h>
#include <headway/core/error.h>
#include <headway/core/plugin_instances.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>

#include "transfer_bench.h"

namespace headway::conformance {
namespace {

using Clock = std::chrono::steady_clock;
using core::KvTransportInstance;

constexpr double kTimeoutSeconds = 10.0;
constexpr double kLargeTimeoutSeconds = 60.0;

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// wait_for()'s answer for a poll the host refused (core::PluginContractError): no state at all.
constexpr int32_t kContractBroken = -1;

// Polls transfer `handle` until it ends or `timeout_s` passes; a poll that fails counts as FAILED
// with its message in `error`, unless the host refused its answer (kContractBroken).
int32_t wait_for(KvTransportInstance& transport, uint64_t handle, double timeout_s,
                 std::string& error) {
  const Clock::time_point give_up = after(timeout_s);
  for (;;) {
    try {
      const int32_t state = transport.poll(handle).state;
      if (state != HW_TRANSFER_PENDING || Clock::now() > give_up) return state;
    } catch (const core::PluginContractError& e) {
      error = std::string("poll() broke abi.h's contract: ") + e.what();
      return kContractBroken;
    } catch (const core::Error& e) {
      error = e.what();
      return HW_TRANSFER_FAILED;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Two instances of the transport under test joined on one link: `receiver` made the id and is
// rank 1, `sender` rank 0 (as the decode and prefill processes do).
struct JoinedLink {
  std::unique_ptr<KvTransportInstance> receiver;
  std::unique_ptr<KvTransportInstance> sender;
  uint64_t receiving = 0;
  uint64_t sending = 0;
  ~JoinedLink() {
    if (receiver) receiver->peer_close(receiving);
    if (sender) sender->peer_close(sending);
  }
};

// What stopped a link from being made: `unsupported` when the transport cannot have one for host
// memory (no peer links, or peer_join refused host memory), otherwise a failure.
struct LinkProblem {
  bool unsupported = false;
  std::string message;
};

// Makes the instances and joins them over `memory` (a host region), waiting until both sides
// report the link up. Fills `link`, or returns what went wrong.
std::optional<LinkProblem> join(const SuiteContext& context, core::HostServices& host,
                                const hw_memory_desc& memory, JoinedLink& link) {
  try {
    link.receiver = std::make_unique<KvTransportInstance>(context.plugin.choice(), host);
    link.sender = std::make_unique<KvTransportInstance>(context.plugin.choice(), host);
  } catch (const core::Error& e) {
    return LinkProblem{false, std::string("create() failed: ") + e.what()};
  }
  if (!link.receiver->has_peer_links()) {
    return LinkProblem{true, "the plugin has no peer links (abi.h, ABI 1.2)"};
  }
  std::vector<uint8_t> id;
  try {
    id = link.receiver->peer_rendezvous();
  } catch (const core::Error& e) {
    return LinkProblem{false, std::string("peer_rendezvous() failed: ") + e.what()};
  }
  try {
    link.receiving = link.receiver->peer_join(id, 1, memory);
  } catch (const core::Error& e) {
    // A transport whose links are for device memory only says so with an argument error (or
    // HW_UNIMPLEMENTED); any other failure of a valid join is the transport's fault.
    const bool refuses_host_memory =
        e.code() == HW_INVALID_ARGUMENT || e.code() == HW_UNIMPLEMENTED;
    return LinkProblem{refuses_host_memory,
                       std::string(refuses_host_memory ? "peer_join() refused host memory: "
                                                       : "peer_join() failed: ") +
                           e.what()};
  }
  try {
    link.sending = link.sender->peer_join(id, 0, memory);
  } catch (const core::Error& e) {
    return LinkProblem{false, std::string("the second peer_join() of an id failed: ") + e.what()};
  }
  const Clock::time_point give_up = after(kTimeoutSeconds);
  for (;;) {
    int32_t receiving = HW_TRANSFER_FAILED, sending = HW_TRANSFER_FAILED;
    try {
      receiving = link.receiver->peer_state(link.receiving);
      sending = link.sender->peer_state(link.sending);
    } catch (const core::Error& e) {
      return LinkProblem{false, std::string("peer_state() failed: ") + e.what()};
    }
    if (receiving == HW_TRANSFER_DONE && sending == HW_TRANSFER_DONE) return std::nullopt;
    if (receiving == HW_TRANSFER_FAILED || sending == HW_TRANSFER_FAILED) {
      return LinkProblem{false, "a side of a freshly joined link reports FAILED"};
    }
    if (Clock::now() > give_up) {
      return LinkProblem{false, fmt::format("the link is not up after {:.0f} s", kTimeoutSeconds)};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Records a link that could not be made: NOT_SUPPORTED or FAIL.
void record(TestRecorder& t, const LinkProblem& problem) {
  if (problem.unsupported) {
    t.not_supported(problem.message);
  } else {
    t.fail(problem.message);
  }
}

std::vector<uint32_t> first_blocks(uint32_t count) {
  std::vector<uint32_t> ids(count);
  std::iota(ids.begin(), ids.end(), 0u);
  return ids;
}

// Three sends and their receives, all posted before any ends: one block, 13 scattered blocks of
// 3,000 bytes across strides with gaps, and 32 MiB. Each must arrive whole, in posting order.
void round_trip(const SuiteContext& context, core::HostServices& host, TestRecorder& t) {
  struct Case {
    Region source;
    Region destination;
    std::vector<uint32_t> from;
    std::vector<uint32_t> to;
  };
  std::vector<Case> cases;
  cases.push_back({Region(8, 4096, 4096), Region(8, 4096, 4096), {3}, {5}});
  cases.push_back({Region(32, 3000, 4096),
                   Region(48, 3000, 3584),
                   {31, 2, 17, 5, 9, 0, 30, 12, 7, 22, 1, 19, 26},
                   {40, 3, 11, 47, 0, 25, 8, 33, 19, 6, 44, 14, 2}});
  cases.push_back({Region(32, 1 << 20, 1 << 20), Region(32, 1 << 20, 1 << 20), first_blocks(32),
                   first_blocks(32)});
  // Each case's source and destination have the same block bytes; the link is joined over the
  // first case's source (only its kind and device matter).
  JoinedLink link;
  if (const auto problem = join(context, host, cases[0].source.desc(), link)) {
    record(t, *problem);
    return;
  }
  std::vector<uint64_t> receives, sends;
  try {
    for (size_t i = 0; i < cases.size(); ++i) {
      cases[i].source.fill(61 + i);
      cases[i].destination.fill(71 + i);
      receives.push_back(link.receiver->peer_post(link.receiving, HW_PEER_RECEIVE,
                                                  cases[i].destination.desc(), cases[i].to));
    }
    for (Case& c : cases) {
      sends.push_back(link.sender->peer_post(link.sending, HW_PEER_SEND, c.source.desc(), c.from));
    }
  } catch (const core::Error& e) {
    t.fail(std::string("peer_post() refused a valid transfer: ") + e.what());
    return;
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string error;
    const int32_t sent = wait_for(*link.sender, sends[i], kLargeTimeoutSeconds, error);
    const int32_t received = wait_for(*link.receiver, receives[i], kLargeTimeoutSeconds, error);
    if (sent != HW_TRANSFER_DONE || received != HW_TRANSFER_DONE) {
      t.fail(
          fmt::format("transfer {}: send {}, receive {} (1 DONE, 2 FAILED, 0 still pending "
                      "after {:.0f} s, -1 an answer abi.h does not define) {}",
                      i, sent, received, kLargeTimeoutSeconds, error));
      return;
    }
    const Case& c = cases[i];
    for (size_t b = 0; b < c.from.size(); ++b) {
      if (!c.destination.block_matches(c.to[b], 61 + i, c.from[b])) {
        t.fail(
            fmt::format("transfer {}: destination block {} does not hold source block {} byte "
                        "for byte",
                        i, c.to[b], c.from[b]));
        return;
      }
    }
    if (const int64_t clobbered = c.destination.first_clobbered(71 + i, c.to); clobbered >= 0) {
      t.fail(
          fmt::format("transfer {}: byte {} of the destination, outside the blocks written, "
                      "changed",
                      i, clobbered));
    }
  }
}

// A receive with nothing sent, then peer_close: the receive reports FAILED at once.
void close_fails_pending(const SuiteContext& context, core::HostServices& host, TestRecorder& t) {
  Region region(4, 4096, 4096);
  JoinedLink link;
  if (const auto problem = join(context, host, region.desc(), link)) {
    record(t, *problem);
    return;
  }
  uint64_t receive = 0;
  try {
    receive =
        link.receiver->peer_post(link.receiving, HW_PEER_RECEIVE, region.desc(), first_blocks(2));
  } catch (const core::Error& e) {
    t.fail(std::string("peer_post() refused a valid receive: ") + e.what());
    return;
  }
  link.receiver->peer_close(link.receiving);
  try {
    const int32_t state = link.receiver->poll(receive).state;
    if (state != HW_TRANSFER_FAILED) {
      t.fail(fmt::format("after peer_close() the pending receive reports state {}, not FAILED",
                         state));
    }
  } catch (const core::Error& e) {
    t.fail(
        std::string("poll() of a transfer on a closed link failed instead of reporting FAILED: ") +
        e.what());
  }
  link.receiver.reset();  // closed already
}

// peer_state and peer_post on a link nobody joined answer an error status.
void unknown_link_refused(const SuiteContext& context, core::HostServices& host, TestRecorder& t) {
  std::unique_ptr<KvTransportInstance> transport;
  try {
    transport = std::make_unique<KvTransportInstance>(context.plugin.choice(), host);
  } catch (const core::Error& e) {
    t.fail(std::string("create() failed: ") + e.what());
    return;
  }
  if (!transport->has_peer_links()) {
    t.not_supported("the plugin has no peer links (abi.h, ABI 1.2)");
    return;
  }
  constexpr uint64_t kNobodysLink = 0x5eed5eed5eedULL;
  try {
    const int32_t state = transport->peer_state(kNobodysLink);
    t.fail(fmt::format("peer_state() of a link never joined answered state {}", state));
  } catch (const core::PluginContractError& e) {
    t.fail(std::string("peer_state() of a link never joined broke abi.h's contract: ") + e.what());
  } catch (const core::Error&) {
  }
  Region region(2, 4096, 4096);
  try {
    transport->peer_post(kNobodysLink, HW_PEER_SEND, region.desc(), first_blocks(1));
    t.fail("peer_post() on a link never joined was accepted");
  } catch (const core::PluginContractError& e) {
    t.fail(std::string("peer_post() on a link never joined broke abi.h's contract: ") + e.what());
  } catch (const core::Error&) {
  }
  transport->peer_close(kNobodysLink);  // must be harmless
}

// A send of 4 blocks met by a receive posted for 5: the receive must never report DONE.
void mismatch_not_done(const SuiteContext& context, core::HostServices& host, TestRecorder& t) {
  Region source(8, 4096, 4096), destination(8, 4096, 4096);
  JoinedLink link;
  if (const auto problem = join(context, host, source.desc(), link)) {
    record(t, *problem);
    return;
  }
  source.fill(81);
  destination.fill(82);
  uint64_t receive = 0, send = 0;
  try {
    receive = link.receiver->peer_post(link.receiving, HW_PEER_RECEIVE, destination.desc(),
                                       first_blocks(5));
    send = link.sender->peer_post(link.sending, HW_PEER_SEND, source.desc(), first_blocks(4));
  } catch (const core::Error& e) {
    t.note(std::string("peer_post() refused it: ") + e.what());
    return;
  }
  std::string error;
  const int32_t received = wait_for(*link.receiver, receive, kTimeoutSeconds, error);
  wait_for(*link.sender, send, kTimeoutSeconds, error);
  if (received == kContractBroken) {
    t.fail("the receive of 5 blocks for a send of 4: " + error);
  } else if (received == HW_TRANSFER_DONE) {
    t.fail("a receive of 5 blocks reported DONE for a send of 4");
  } else if (received == HW_TRANSFER_PENDING) {
    t.warn(
        fmt::format("the receive is still PENDING after {:.0f} s: a mismatched pair waits for "
                    "the transport's own timeout",
                    kTimeoutSeconds));
  } else {
    t.note("the receive reported FAILED");
  }
}

}  // namespace

std::vector<TestResult> run_peer_link_checks(const SuiteContext& context,
                                             core::HostServices& host) {
  std::vector<TestResult> results;
  auto run = [&](TestRecorder t, auto&& body) {
    body(context, host, t);
    results.push_back(t.finish());
  };
  run(TestRecorder("kv.peer_links.round_trip",
                   "over a link of two instances, three sends and their receives (1 block, 13 "
                   "scattered, 32 MiB) arrive byte for byte in posting order"),
      round_trip);
  run(TestRecorder("kv.peer_links.close_fails_pending",
                   "a receive pending when its link is closed reports FAILED"),
      close_fails_pending);
  run(TestRecorder("kv.peer_links.unknown_link_refused",
                   "peer_state and peer_post on a link never joined answer an error"),
      unknown_link_refused);
  run(TestRecorder("kv.peer_links.mismatch_not_done",
                   "a receive posted for 5 blocks, met by a send of 4, is never DONE"),
      mismatch_not_done);
  return results;
}

}  // namespace headway::conformance
