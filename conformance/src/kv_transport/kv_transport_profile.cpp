// kv-transport-core: byte-exact round trips in host memory (one block, many, scattered with gaps,
// 256 MiB, blocks of 16 MiB), concurrent transfers from several threads, a bad block giving FAILED
// within a bounded wait, the bandwidth measured, and peer links where the transport has them
// (peer_link_checks.h). See docs/conformance.md.
#include <fmt/format.h>
#include <headway/conformance/suite.h>
#include <headway/conformance/test_recorder.h>
#include <headway/core/clock.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "../heap_growth.h"
#include "peer_link_checks.h"
#include "transfer_bench.h"

namespace headway::conformance {
namespace {

constexpr double kTimeoutSeconds = 10.0;
constexpr double kLargeTimeoutSeconds = 60.0;
constexpr double kBandwidthFloor = 1e9;  // bytes/s: host memory copies do far better
// abi.h: a simulated transfer answers DONE within 2 s of wall time of its start (`simulate` waits
// that long for it, then ends the run).
constexpr double kSimulatedAllowanceSeconds = 2.0;
// kv.per_transfer_heap: transfers moved before the heap is watched, then while it is (as
// router.per_request_heap routes its requests).
constexpr uint32_t kPerTransferWarmUp = 8000;
constexpr uint32_t kPerTransferWatched = 8000;

// Regions and block lists of transfers the transport may not be done with
// (TransferResult::settled()): a transport that is only slow, or answered a state the host refused
// while its worker still copies, may use them after the test gave up (abi.h lends them until the
// transfer ends), so they outlive the instance (the profile declares this before it). Freed with
// the test instead, the worker's write would be a use-after-free, which AddressSanitizer reports
// as the suite's crash (suite.completed) rather than the test's FAIL naming what the transport
// answered. Threading: any thread (kv.concurrent's keep theirs).
class AbandonedRegions {
 public:
  // Keeps the regions (null ones are ignored) and block lists of a transfer that has not settled,
  // until this is destroyed; leaves them to the caller otherwise.
  void keep_unless_settled(const TransferResult& r, std::unique_ptr<Region>& source,
                           std::unique_ptr<Region>& destination) {
    if (r.settled()) return;
    keep(r.block_lists);
    std::lock_guard lock(mutex_);
    if (source != nullptr) kept_.push_back(std::shared_ptr<Region>(std::move(source)));
    if (destination != nullptr) kept_.push_back(std::shared_ptr<Region>(std::move(destination)));
  }
  // Keeps `lent` (block lists) until this is destroyed.
  void keep(std::shared_ptr<const void> lent) {
    std::lock_guard lock(mutex_);
    kept_.push_back(std::move(lent));
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<const void>> kept_;
};

// Runs one transfer from `source` to `destination` and checks every written block and every byte
// around them. Returns an empty string when it is byte-exact. When the transfer did not settle,
// the regions move to `abandoned` (the pointers are then null).
std::string round_trip(core::KvTransportInstance& transport, std::unique_ptr<Region>& source_region,
                       std::unique_ptr<Region>& destination_region,
                       const std::vector<uint32_t>& from, const std::vector<uint32_t>& to,
                       uint64_t tag, double timeout, AbandonedRegions& abandoned,
                       TransferResult* out = nullptr) {
  Region& source = *source_region;
  Region& destination = *destination_region;
  source.fill(tag);
  destination.fill(tag + 1);
  const TransferResult r = transfer(transport, source, destination, from, to, timeout);
  if (out != nullptr) *out = r;
  abandoned.keep_unless_settled(r, source_region, destination_region);
  // A broken contract first: start() can break it too (an exception through its C table).
  if (r.contract_broken) {
    return std::string(r.refused ? "start()" : "poll()") +
           " broke abi.h's contract for a valid transfer: " + r.error;
  }
  if (r.refused) return "start() refused a valid transfer: " + r.error;
  if (r.state == HW_TRANSFER_PENDING) {
    return fmt::format("still pending after {:.0f} s", timeout);
  }
  if (r.state != HW_TRANSFER_DONE) return "reported FAILED for a valid transfer " + r.error;
  for (size_t i = 0; i < from.size(); ++i) {
    if (!destination.block_matches(to[i], tag, from[i])) {
      return fmt::format("destination block {} does not hold source block {} byte for byte", to[i],
                         from[i]);
    }
  }
  const int64_t clobbered = destination.first_clobbered(tag + 1, to);
  if (clobbered >= 0) {
    return fmt::format("byte {} of the destination, outside the blocks written, changed",
                       clobbered);
  }
  if (source.first_clobbered(tag, {}) >= 0) return "the source region changed";
  return "";
}

}  // namespace

std::vector<TestResult> run_kv_transport_profile(const SuiteContext& context) {
  core::VirtualClock clock;
  core::HostServices host("kv_transport", &clock);
  std::vector<TestResult> results;
  // Declared before the transport, destroyed after it.
  AbandonedRegions abandoned;
  std::unique_ptr<core::KvTransportInstance> transport;
  try {
    transport = std::make_unique<core::KvTransportInstance>(context.plugin.choice(), host);
  } catch (const core::Error& e) {
    throw_if_options_refused(context.plugin, e);
    for (const char* id : {"kv.one_block", "kv.many_blocks", "kv.non_contiguous",
                           "kv.large_transfer", "kv.large_blocks", "kv.concurrent",
                           "kv.failure_reported", "kv.per_transfer_heap", "kv.offset_overflow"}) {
      TestRecorder t(id, "");
      t.fail(std::string("create() failed: ") + e.what());
      results.push_back(t.finish());
    }
    return results;
  }
  std::mt19937_64 rng(context.options.seed);
  auto run = [&](TestRecorder t, auto&& body) {
    body(t);
    results.push_back(t.finish());
  };

  run(TestRecorder("kv.one_block", "one 4 KiB block arrives byte for byte, nothing else changes"),
      [&](TestRecorder& t) {
        auto src = std::make_unique<Region>(8, 4096, 4096);
        auto dst = std::make_unique<Region>(8, 4096, 4096);
        const std::string e =
            round_trip(*transport, src, dst, {3}, {5}, 11, kTimeoutSeconds, abandoned);
        if (!e.empty()) t.fail(e);
      });
  run(TestRecorder("kv.many_blocks", "64 blocks of 16 KiB in one transfer"), [&](TestRecorder& t) {
    auto src = std::make_unique<Region>(64, 16384, 16384);
    auto dst = std::make_unique<Region>(64, 16384, 16384);
    std::vector<uint32_t> ids(64);
    std::iota(ids.begin(), ids.end(), 0u);
    const std::string e =
        round_trip(*transport, src, dst, ids, ids, 21, kTimeoutSeconds, abandoned);
    if (!e.empty()) t.fail(e);
  });
  run(TestRecorder("kv.non_contiguous",
                   "scattered block lists, strides with gaps, permuted destinations"),
      [&](TestRecorder& t) {
        auto src = std::make_unique<Region>(32, 3000, 4096);
        auto dst = std::make_unique<Region>(48, 3000, 3584);
        std::vector<uint32_t> from(32), to(48);
        std::iota(from.begin(), from.end(), 0u);
        std::iota(to.begin(), to.end(), 0u);
        std::shuffle(from.begin(), from.end(), rng);
        std::shuffle(to.begin(), to.end(), rng);
        from.resize(13);
        to.resize(13);
        const std::string e =
            round_trip(*transport, src, dst, from, to, 31, kTimeoutSeconds, abandoned);
        if (!e.empty()) t.fail(e);
      });
  TransferResult large;
  run(TestRecorder("kv.large_transfer", "256 MiB in one transfer (256 blocks of 1 MiB)"),
      [&](TestRecorder& t) {
        auto src = std::make_unique<Region>(256, 1 << 20, 1 << 20);
        auto dst = std::make_unique<Region>(256, 1 << 20, 1 << 20);
        std::vector<uint32_t> ids(256);
        std::iota(ids.begin(), ids.end(), 0u);
        const std::string e =
            round_trip(*transport, src, dst, ids, ids, 41, kLargeTimeoutSeconds, abandoned, &large);
        if (!e.empty()) t.fail(e);
      });
  run(TestRecorder("kv.large_blocks",
                   "16 blocks of 16 MiB in one transfer (a 70B model's 16-token block at tp 1 is "
                   "5 MiB)"),
      [&](TestRecorder& t) {
        auto src = std::make_unique<Region>(16, 16 << 20, 16 << 20);
        auto dst = std::make_unique<Region>(16, 16 << 20, 16 << 20);
        std::vector<uint32_t> from(16), to(16);
        std::iota(from.begin(), from.end(), 0u);
        std::iota(to.begin(), to.end(), 0u);
        std::shuffle(to.begin(), to.end(), rng);
        const std::string e =
            round_trip(*transport, src, dst, from, to, 45, kLargeTimeoutSeconds, abandoned);
        if (!e.empty()) t.fail(e);
      });
  run(TestRecorder("kv.concurrent",
                   "4 threads, each moving 16 transfers between its own pair of regions"),
      [&](TestRecorder& t) {
        std::mutex mutex;
        std::vector<std::thread> threads;
        for (uint32_t k = 0; k < 4; ++k) {
          threads.emplace_back([&, k] {
            auto src = std::make_unique<Region>(64, 8192, 8192);
            auto dst = std::make_unique<Region>(64, 8192, 8192);
            std::mt19937_64 local(context.options.seed + k);
            for (uint32_t i = 0; i < 16; ++i) {
              std::vector<uint32_t> from(64), to(64);
              std::iota(from.begin(), from.end(), 0u);
              std::iota(to.begin(), to.end(), 0u);
              std::shuffle(from.begin(), from.end(), local);
              std::shuffle(to.begin(), to.end(), local);
              from.resize(1 + i * 3);
              to.resize(1 + i * 3);
              const std::string e = round_trip(*transport, src, dst, from, to, 100 * k + i,
                                               kTimeoutSeconds, abandoned);
              if (!e.empty()) {
                std::lock_guard lock(mutex);
                t.fail(fmt::format("thread {} transfer {}: {}", k, i, e));
                // Its first failure says it: a transport that never ends its transfers would
                // otherwise hold the thread for 16 timeouts (160 s) and the suite for 4 minutes.
                return;
              }
            }
          });
        }
        for (std::thread& th : threads) th.join();
      });
  run(TestRecorder("kv.failure_reported",
                   "a block outside the source or the destination region gives an error or "
                   "FAILED, within a bounded wait"),
      [&](TestRecorder& t) {
        // Block 9 of a 4-block region, on each side: a transport that checks only the blocks it
        // writes reads past the source (another request's KV, or unmapped memory).
        std::string notes;  // what each side answered, shown on PASS
        for (const bool bad_source : {false, true}) {
          const char* side = bad_source ? "source" : "destination";
          auto src = std::make_unique<Region>(4, 4096, 4096);
          auto dst = std::make_unique<Region>(4, 4096, 4096);
          src->fill(51);
          dst->fill(52);
          const TransferResult r =
              bad_source ? transfer(*transport, *src, *dst, {0, 9}, {0, 1}, kTimeoutSeconds)
                         : transfer(*transport, *src, *dst, {0, 1}, {1, 9}, kTimeoutSeconds);
          abandoned.keep_unless_settled(r, src, dst);
          if (r.contract_broken) {
            t.fail(std::string(side) + ": " + r.error);
          } else if (r.refused) {
            notes += fmt::format("{}{}: start() refused it: {}", notes.empty() ? "" : "; ", side,
                                 r.error);
          } else if (r.state == HW_TRANSFER_PENDING) {
            t.fail(fmt::format("{}: still PENDING after {:.0f} s (a hang)", side, kTimeoutSeconds));
          } else if (r.state == HW_TRANSFER_DONE) {
            t.fail(fmt::format("reported DONE for a transfer {} block 9 of a 4-block {} region",
                               bad_source ? "from" : "to", side));
          } else {
            notes += fmt::format("{}{}: FAILED after {:.3f} s", notes.empty() ? "" : "; ", side,
                                 r.wall_seconds);
          }
        }
        t.note(notes);
      });
  run(TestRecorder("kv.per_transfer_heap",
                   "transfers keep no heap memory in the transport once they ended"),
      [&](TestRecorder& t) {
        // One 4 KiB block a transfer, between regions made before the heap is watched; the
        // suite's own allocations in transfer() are freed before the next (the heap figure is
        // the bytes in use, not allocated). A transfer's descriptor, handle or completion record
        // kept after poll() reported it grows the heap for every request a deployment moves.
        auto src = std::make_unique<Region>(4, 4096, 4096);
        auto dst = std::make_unique<Region>(4, 4096, 4096);
        src->fill(71);
        dst->fill(72);
        const std::vector<uint32_t> from = {1}, to = {2};
        const auto move = [&](uint32_t count) -> bool {
          for (uint32_t i = 0; i < count; ++i) {
            const TransferResult r = transfer(*transport, *src, *dst, from, to, kTimeoutSeconds);
            if (r.state == HW_TRANSFER_DONE && r.settled()) continue;
            abandoned.keep_unless_settled(r, src, dst);
            t.skip(fmt::format("transfer {} did not end DONE (the round trips say why): {}", i,
                               r.refused         ? "start() refused it: " + r.error
                               : r.error.empty() ? fmt::format("state {}", r.state)
                                                 : r.error));
            return false;
          }
          return true;
        };
        if (!move(kPerTransferWarmUp)) return;
        const HeapWatch watch;
        if (!move(kPerTransferWatched)) return;
        judge_heap_growth(t, watch.stop(kPerTransferWatched), kPerRequestHeapBounds, "transfers",
                          "transfer");
      });
  run(TestRecorder("kv.offset_overflow",
                   "a block whose offset (block x stride) overflows 64 bits is refused or FAILED, "
                   "not copied where the overflow lands"),
      [&](TestRecorder& t) {
        // A destination of one 4 KiB block at a stride of 2^62: block 4's offset, 2^64, wraps
        // around to 0, where a hand-written `block * stride + bytes <= size` sees block 0 inside
        // the region. sdk::block_in_region() computes no such product.
        auto src = std::make_unique<Region>(1, 4096, 4096);
        auto dst = std::make_unique<Region>(1, 4096, 4096);
        src->fill(61);
        dst->fill(62);
        hw_memory_desc wide = dst->desc();
        wide.block_stride = uint64_t{1} << 62;
        const TransferResult r = transfer(*transport, src->desc(), wide, {0}, {4}, kTimeoutSeconds);
        abandoned.keep_unless_settled(r, src, dst);
        if (r.contract_broken) {
          t.fail(r.error);
        } else if (r.refused) {
          t.note("start() refused it: " + r.error);
        } else if (r.state == HW_TRANSFER_PENDING) {
          t.fail(fmt::format("still PENDING after {:.0f} s (a hang)", kTimeoutSeconds));
        } else if (r.state == HW_TRANSFER_DONE) {
          t.fail(fmt::format(
              "reported DONE for block 4 of a one-block region at a stride of 2^62, "
              "whose offset (2^64) wraps around to 0 in 64 bits{}: check blocks "
              "with headway::sdk::block_in_region()",
              dst->first_clobbered(62, {}) >= 0 ? ", and block 0 was overwritten" : ""));
        } else {
          t.note(fmt::format("FAILED after {:.3f} s", r.wall_seconds));
        }
      });
  run(TestRecorder("kv.bandwidth",
                   fmt::format("host-to-host bandwidth of the large transfer (floor {:.0f} GB/s)",
                               kBandwidthFloor / 1e9)),
      [&](TestRecorder& t) {
        if (large.state != HW_TRANSFER_DONE || large.wall_seconds <= 0) {
          t.skip("the large transfer did not complete");
          return;
        }
        const double bytes = 256.0 * (1 << 20);
        const double wall = bytes / large.wall_seconds;
        t.metrics() = {{"wall_gb_per_s", wall / 1e9},
                       {"reported_seconds", large.reported_seconds},
                       {"wall_seconds", large.wall_seconds}};
        const std::string text = fmt::format("{:.2f} GB/s measured ({:.3f} s reported)", wall / 1e9,
                                             large.reported_seconds);
        if (wall < kBandwidthFloor) {
          t.warn(text);
        } else {
          t.note(text);
        }
      });
  run(TestRecorder("kv.simulated_memory",
                   "transfers between simulated (HW_MEMORY_NONE) regions report a duration"),
      [&](TestRecorder& t) {
        const hw_memory_desc simulated{nullptr, 0, HW_MEMORY_NONE, -1, 1 << 20, 1 << 20};
        const std::vector<uint32_t> ids = {0, 1, 2, 3};
        // Polled as the round trips are, for the wall time abi.h allows it. The host's checks of
        // the answers (an undefined state or status code, a thrown exception) apply here as under
        // every test: only a refusal in abi.h's terms is NOT_SUPPORTED.
        const TransferResult r =
            transfer(*transport, simulated, simulated, ids, ids, kSimulatedAllowanceSeconds);
        if (!r.settled()) abandoned.keep(r.block_lists);
        if (r.contract_broken) {
          t.fail(std::string(r.refused ? "start()" : "poll()") +
                 " broke abi.h's contract for a simulated transfer: " + r.error);
        } else if (r.refused) {
          t.not_supported("start() refused simulated memory: " + r.error);
        } else if (r.state == HW_TRANSFER_PENDING) {
          t.fail(
              fmt::format("still PENDING {:.0f} s after start() (abi.h: a simulated transfer "
                          "answers DONE within {:.0f} s; headway simulate ends the run)",
                          kSimulatedAllowanceSeconds, kSimulatedAllowanceSeconds));
        } else if (r.state != HW_TRANSFER_DONE) {
          t.fail("reported FAILED for a simulated transfer" +
                 (r.error.empty() ? std::string() : ": " + r.error));
        } else if (!(r.reported_seconds > 0)) {
          t.fail(fmt::format("reported DONE in {} s (a modelled transfer takes time)",
                             r.reported_seconds));
        } else {
          t.note(fmt::format("4 MiB modelled at {:.6f} s, answered after {:.3f} s of wall time",
                             r.reported_seconds, r.wall_seconds));
        }
      });
  for (TestResult& r : run_peer_link_checks(context, host)) results.push_back(std::move(r));
  return results;
}

}  // namespace headway::conformance
