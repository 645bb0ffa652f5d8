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

#include "peer_link_checks.h"
#include "transfer_bench.h"

namespace headway::conformance {
namespace {

constexpr double kTimeoutSeconds = 10.0;
constexpr double kLargeTimeoutSeconds = 60.0;
constexpr double kBandwidthFloor = 1e9;  // bytes/s: host memory copies do far better

// Runs one transfer from `source` to `destination` and checks every written block and every byte
// around them. Returns an empty string when it is byte-exact.
std::string round_trip(core::KvTransportInstance& transport, Region& source, Region& destination,
                       const std::vector<uint32_t>& from, const std::vector<uint32_t>& to,
                       uint64_t tag, double timeout, TransferResult* out = nullptr) {
  source.fill(tag);
  destination.fill(tag + 1);
  const TransferResult r = transfer(transport, source, destination, from, to, timeout);
  if (out != nullptr) *out = r;
  if (r.refused) return "start() refused a valid transfer: " + r.error;
  if (r.contract_broken) return "poll() broke abi.h's contract for a valid transfer: " + r.error;
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
  // Regions of transfers given up on: a transport that is only slow may still write them, so they
  // outlive it (declared before it, destroyed after).
  std::vector<std::unique_ptr<Region>> abandoned;
  std::unique_ptr<core::KvTransportInstance> transport;
  try {
    transport = std::make_unique<core::KvTransportInstance>(context.plugin.choice(), host);
  } catch (const core::Error& e) {
    throw_if_options_refused(context.plugin, e);
    for (const char* id :
         {"kv.one_block", "kv.many_blocks", "kv.non_contiguous", "kv.large_transfer",
          "kv.large_blocks", "kv.concurrent", "kv.failure_reported"}) {
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
        Region src(8, 4096, 4096), dst(8, 4096, 4096);
        const std::string e = round_trip(*transport, src, dst, {3}, {5}, 11, kTimeoutSeconds);
        if (!e.empty()) t.fail(e);
      });
  run(TestRecorder("kv.many_blocks", "64 blocks of 16 KiB in one transfer"), [&](TestRecorder& t) {
    Region src(64, 16384, 16384), dst(64, 16384, 16384);
    std::vector<uint32_t> ids(64);
    std::iota(ids.begin(), ids.end(), 0u);
    const std::string e = round_trip(*transport, src, dst, ids, ids, 21, kTimeoutSeconds);
    if (!e.empty()) t.fail(e);
  });
  run(TestRecorder("kv.non_contiguous",
                   "scattered block lists, strides with gaps, permuted destinations"),
      [&](TestRecorder& t) {
        Region src(32, 3000, 4096), dst(48, 3000, 3584);
        std::vector<uint32_t> from(32), to(48);
        std::iota(from.begin(), from.end(), 0u);
        std::iota(to.begin(), to.end(), 0u);
        std::shuffle(from.begin(), from.end(), rng);
        std::shuffle(to.begin(), to.end(), rng);
        from.resize(13);
        to.resize(13);
        const std::string e = round_trip(*transport, src, dst, from, to, 31, kTimeoutSeconds);
        if (!e.empty()) t.fail(e);
      });
  TransferResult large;
  run(TestRecorder("kv.large_transfer", "256 MiB in one transfer (256 blocks of 1 MiB)"),
      [&](TestRecorder& t) {
        Region src(256, 1 << 20, 1 << 20), dst(256, 1 << 20, 1 << 20);
        std::vector<uint32_t> ids(256);
        std::iota(ids.begin(), ids.end(), 0u);
        const std::string e =
            round_trip(*transport, src, dst, ids, ids, 41, kLargeTimeoutSeconds, &large);
        if (!e.empty()) t.fail(e);
      });
  run(TestRecorder("kv.large_blocks",
                   "16 blocks of 16 MiB in one transfer (a 70B model's 16-token block at tp 1 is "
                   "5 MiB)"),
      [&](TestRecorder& t) {
        Region src(16, 16 << 20, 16 << 20), dst(16, 16 << 20, 16 << 20);
        std::vector<uint32_t> from(16), to(16);
        std::iota(from.begin(), from.end(), 0u);
        std::iota(to.begin(), to.end(), 0u);
        std::shuffle(to.begin(), to.end(), rng);
        const std::string e = round_trip(*transport, src, dst, from, to, 45, kLargeTimeoutSeconds);
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
              const std::string e =
                  round_trip(*transport, *src, *dst, from, to, 100 * k + i, kTimeoutSeconds);
              if (!e.empty()) {
                std::lock_guard lock(mutex);
                t.fail(fmt::format("thread {} transfer {}: {}", k, i, e));
                // Its first failure says it: a transport that never ends its transfers would
                // otherwise hold the thread for 16 timeouts (160 s) and the suite for 4 minutes.
                abandoned.push_back(std::move(src));
                abandoned.push_back(std::move(dst));
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
          Region src(4, 4096, 4096), dst(4, 4096, 4096);
          src.fill(51);
          dst.fill(52);
          const TransferResult r =
              bad_source ? transfer(*transport, src, dst, {0, 9}, {0, 1}, kTimeoutSeconds)
                         : transfer(*transport, src, dst, {0, 1}, {1, 9}, kTimeoutSeconds);
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
        hw_kv_transfer tr{};
        tr.struct_size = sizeof(hw_kv_transfer);
        tr.source = hw_memory_desc{nullptr, 0, HW_MEMORY_NONE, -1, 1 << 20, 1 << 20};
        tr.destination = tr.source;
        const std::vector<uint32_t> ids = {0, 1, 2, 3};
        tr.source_blocks = ids.data();
        tr.destination_blocks = ids.data();
        tr.block_count = 4;
        try {
          const uint64_t handle = transport->start(tr);
          core::KvTransportInstance::Progress p{HW_TRANSFER_PENDING, 0};
          for (int i = 0; i < 100000 && p.state == HW_TRANSFER_PENDING; ++i) {
            p = transport->poll(handle);
          }
          if (p.state != HW_TRANSFER_DONE || !std::isfinite(p.seconds) || p.seconds <= 0) {
            t.fail(fmt::format("state {}, {} s", p.state, p.seconds));
          } else {
            t.note(fmt::format("4 MiB modelled at {:.6f} s", p.seconds));
          }
        } catch (const core::Error& e) {
          t.not_supported(std::string("start() refused simulated memory: ") + e.what());
        }
      });
  for (TestResult& r : run_peer_link_checks(context, host)) results.push_back(std::move(r));
  return results;
}

}  // namespace headway::conformance
