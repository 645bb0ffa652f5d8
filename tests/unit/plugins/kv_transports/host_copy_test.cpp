// The host_copy KV transport, loaded from the built plugin directory through core::PluginRegistry
// and driven through the C ABI by core::KvTransportInstance, as core::Cluster drives it.
//
// Simulated transfers (memory kind NONE) must report latency + bytes / (bandwidth * efficiency *
// links) from the link presets documented in the plugin's options (nvlink 450 GB/s 5 us, pcie5
// 64 GB/s 10 us, rdma100 12.5 GB/s 10 us, rdma400 50 GB/s 10 us, tcp 25 Gb/s = 3.125 GB/s 50 us;
// efficiency 0.8 and 1 link by default); the expected durations below are worked out by hand from
// those numbers. Real transfers (both sides HOST) must copy the blocks' bytes exactly, whatever
// the block lists and strides, also when several threads transfer at once; bad transfers must
// fail cleanly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <toml++/toml.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../../test_support/captured_log.h"
#include "host_copy_harness.h"

namespace headway::core {
namespace {

using ::testing::HasSubstr;

hw_memory_desc simulated(uint64_t block_bytes) {
  return hw_memory_desc{nullptr, 0, HW_MEMORY_NONE, -1, block_bytes, block_bytes};
}

hw_kv_transfer transfer_of(const hw_memory_desc& source, const hw_memory_desc& destination,
                           const std::vector<uint32_t>& source_blocks,
                           const std::vector<uint32_t>& destination_blocks, uint64_t id = 1) {
  return hw_kv_transfer{sizeof(hw_kv_transfer),
                        id,
                        source,
                        destination,
                        source_blocks.data(),
                        destination_blocks.data(),
                        static_cast<uint32_t>(source_blocks.size()),
                        0,
                        1};
}

std::vector<uint32_t> iota(uint32_t first, uint32_t count) {
  std::vector<uint32_t> v(count);
  for (uint32_t i = 0; i < count; ++i) v[i] = first + i;
  return v;
}

// Modelled seconds of one simulated transfer of `blocks` blocks of `block_bytes`.
double simulated_seconds(TransportHarness& t, uint32_t blocks, uint64_t block_bytes) {
  const std::vector<uint32_t> src = iota(0, blocks), dst = iota(100, blocks);
  const uint64_t handle =
      t->start(transfer_of(simulated(block_bytes), simulated(block_bytes), src, dst));
  KvTransportInstance::Progress p = t->poll(handle);
  EXPECT_EQ(p.state, HW_TRANSFER_DONE) << "a simulated transfer is done as soon as it starts";
  return p.seconds;
}

// 8 blocks of 2 MiB (16 tokens of Llama-3.1-8B's 128 KiB per token): 16,777,216 bytes.
constexpr uint64_t kBlockBytes = 2u << 20;
constexpr uint32_t kBlocks = 8;
constexpr double kUs = 1e-6;

// -------------------------------------------------------------------------------------------------
// Simulated transfers: the cost model
// -------------------------------------------------------------------------------------------------

TEST(HostCopySimulated, EachLinkPresetCostsLatencyPlusBytesOverEffectiveBandwidth) {
  struct Case {
    const char* link;
    double seconds;
  };
  // 16,777,216 B at 80 % of the preset's bandwidth, plus its latency:
  const Case cases[] = {
      {"nvlink", 5 * kUs + 16777216 / 360e9},  // 360 GB/s: 46.60337... + 5 us
      {"pcie5", 337.68 * kUs},                 // 51.2 GB/s: 327.68 + 10 us
      {"rdma100", 1687.7216 * kUs},            // 10 GB/s: 1677.7216 + 10 us
      {"rdma400", 429.4304 * kUs},             // 40 GB/s: 419.4304 + 10 us
      {"tcp", 6760.8864 * kUs},                // 2.5 GB/s: 6710.8864 + 50 us
  };
  for (const Case& c : cases) {
    TransportHarness t(std::string("link = \"") + c.link + "\"");
    EXPECT_NEAR(simulated_seconds(t, kBlocks, kBlockBytes), c.seconds, 1e-12) << c.link;
  }
  // No options: pcie5.
  TransportHarness defaults;
  EXPECT_NEAR(simulated_seconds(defaults, kBlocks, kBlockBytes), 337.68 * kUs, 1e-12);
}

TEST(HostCopySimulated, CustomValuesAndOverridesOfAPreset) {
  // custom: 100 GB/s x 0.5 efficiency x 4 links = 200 GB/s: 83.88608 us, + 2 us.
  TransportHarness custom(
      "link = \"custom\"\nbandwidth_gb_per_s = 100.0\nlatency_us = 2.0\nlinks = 4\n"
      "efficiency = 0.5");
  EXPECT_NEAR(simulated_seconds(custom, kBlocks, kBlockBytes), 85.88608 * kUs, 1e-12);
  // custom without a latency: -1 means the preset's, and custom has none: 0.
  TransportHarness custom_no_latency("link = \"custom\"\nbandwidth_gb_per_s = 100.0");
  EXPECT_NEAR(simulated_seconds(custom_no_latency, kBlocks, kBlockBytes), 16777216 / 80e9, 1e-12);

  // nvlink over 4 links (one per GPU of a TP4 group), no latency: 16,777,216 / 1440e9.
  TransportHarness nvlink4("link = \"nvlink\"\nlinks = 4\nlatency_us = 0.0");
  EXPECT_NEAR(simulated_seconds(nvlink4, kBlocks, kBlockBytes), 16777216 / 1440e9, 1e-15);
  // pcie5 at half its bandwidth (a Gen5 x8 slot): 25.6 GB/s: 655.36 + 10 us.
  TransportHarness pcie_x8("link = \"pcie5\"\nbandwidth_gb_per_s = 32.0");
  EXPECT_NEAR(simulated_seconds(pcie_x8, kBlocks, kBlockBytes), 665.36 * kUs, 1e-12);
  // efficiency 1: the raw 64 GB/s: 262.144 + 10 us.
  TransportHarness pcie_ideal("efficiency = 1.0");
  EXPECT_NEAR(simulated_seconds(pcie_ideal, kBlocks, kBlockBytes), 272.144 * kUs, 1e-12);
}

TEST(HostCopySimulated, CostScalesWithBlocksAndBlockSize) {
  TransportHarness t("link = \"rdma100\"");                            // 10 GB/s effective, 10 us
  EXPECT_NEAR(simulated_seconds(t, 0, kBlockBytes), 10 * kUs, 1e-15);  // latency only
  EXPECT_NEAR(simulated_seconds(t, 1, 10000), 10 * kUs + 1 * kUs, 1e-15);
  EXPECT_NEAR(simulated_seconds(t, 1000, 10000), 10 * kUs + 1000 * kUs, 1e-12);
}

// One side with bytes and the other without is not a simulation: answering DONE would leave the
// destination's blocks as they were, read by its engine as the request's KV.
TEST(HostCopySimulated, OneSimulatedSideIsRefused) {
  TransportHarness t;
  std::vector<unsigned char> bytes(4 * 64, 0xAB);
  const hw_memory_desc host{bytes.data(), bytes.size(), HW_MEMORY_HOST, -1, 64, 64};
  const std::vector<uint32_t> blocks = {0, 1, 2, 3};
  Error e = error_of([&] { t->start(transfer_of(host, simulated(64), blocks, blocks)); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("the destination region is simulated"));
  e = error_of([&] { t->start(transfer_of(simulated(64), host, blocks, blocks)); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("the source region is simulated"));
  EXPECT_EQ(bytes, std::vector<unsigned char>(4 * 64, 0xAB));
}

TEST(HostCopySimulated, ACompletedTransferIsReportedOnceThenForgotten) {
  TransportHarness t;
  const std::vector<uint32_t> blocks = {0};
  const uint64_t handle = t->start(transfer_of(simulated(64), simulated(64), blocks, blocks));
  EXPECT_EQ(t->poll(handle).state, HW_TRANSFER_DONE);
  Error e = error_of([&] { t->poll(handle); });
  EXPECT_EQ(e.code(), HW_NOT_FOUND);
}

// -------------------------------------------------------------------------------------------------
// Real host-memory transfers
// -------------------------------------------------------------------------------------------------

// A host KV region of `blocks` blocks of `block_bytes`, `stride` apart, filled with a pattern that
// differs per region (`tag`), per block and per byte; the gaps between blocks hold 0xEE.
struct HostRegion {
  HostRegion(uint32_t blocks, uint64_t block_bytes, uint64_t stride, uint8_t tag)
      : bytes(blocks * stride, 0xEE), block_bytes(block_bytes), stride(stride) {
    for (uint32_t b = 0; b < blocks; ++b) {
      for (uint64_t i = 0; i < block_bytes; ++i) {
        bytes[b * stride + i] = static_cast<unsigned char>(tag * 37 + b * 11 + i * 3 + (i >> 8));
      }
    }
  }
  hw_memory_desc desc() {
    return hw_memory_desc{bytes.data(), bytes.size(), HW_MEMORY_HOST, -1, block_bytes, stride};
  }
  std::vector<unsigned char> block(uint32_t b) const {
    return {bytes.begin() + b * stride, bytes.begin() + b * stride + block_bytes};
  }

  std::vector<unsigned char> bytes;
  uint64_t block_bytes;
  uint64_t stride;
};

// Destination block d[i] now holds source block s[i]; every other destination block, and every gap
// between blocks, still holds what `before` held.
void expect_copied(const HostRegion& source, const HostRegion& destination,
                   const std::vector<unsigned char>& before, const std::vector<uint32_t>& s,
                   const std::vector<uint32_t>& d) {
  std::vector<unsigned char> expected = before;
  for (size_t i = 0; i < s.size(); ++i) {
    const std::vector<unsigned char> block = source.block(s[i]);
    std::copy(block.begin(), block.end(), expected.begin() + d[i] * destination.stride);
  }
  ASSERT_EQ(destination.bytes.size(), expected.size());
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (destination.bytes[i] != expected[i] && mismatches++ == 0) first = i;
  }
  EXPECT_EQ(mismatches, 0u) << "first differing byte at offset " << first << " (block "
                            << first / destination.stride << ")";
}

TEST(HostCopyReal, OneBlockIsCopiedByteForByte) {
  TransportHarness t;
  HostRegion source(8, 4096, 4096, 1), destination(8, 4096, 4096, 2);
  const std::vector<unsigned char> before = destination.bytes;
  const std::vector<uint32_t> s = {3}, d = {5};
  const uint64_t handle = t->start(transfer_of(source.desc(), destination.desc(), s, d));
  KvTransportInstance::Progress p = wait(*t, handle);
  EXPECT_EQ(p.state, HW_TRANSFER_DONE);
  EXPECT_GE(p.seconds, 0.0);
  expect_copied(source, destination, before, s, d);
}

TEST(HostCopyReal, ManyBlocksAreCopiedByteForByte) {
  TransportHarness t;
  HostRegion source(256, 4096, 4096, 3), destination(256, 4096, 4096, 4);
  const std::vector<unsigned char> before = destination.bytes;
  const std::vector<uint32_t> all = iota(0, 256);
  const uint64_t handle = t->start(transfer_of(source.desc(), destination.desc(), all, all));
  EXPECT_EQ(wait(*t, handle).state, HW_TRANSFER_DONE);
  expect_copied(source, destination, before, all, all);
  EXPECT_EQ(destination.bytes, source.bytes);
}

TEST(HostCopyReal, PermutedBlockListsAndDifferentStridesLandInTheRightPlaces) {
  TransportHarness t;
  // Blocks of 64 bytes, 128 apart on the source and 80 apart on the destination (padding that must
  // stay untouched), in an order that is neither ascending nor the same on both sides.
  HostRegion source(8, 64, 128, 5), destination(8, 64, 80, 6);
  const std::vector<unsigned char> before = destination.bytes;
  const std::vector<uint32_t> s = {7, 2, 5, 0}, d = {1, 6, 3, 4};
  const uint64_t handle = t->start(transfer_of(source.desc(), destination.desc(), s, d));
  EXPECT_EQ(wait(*t, handle).state, HW_TRANSFER_DONE);
  expect_copied(source, destination, before, s, d);
  // A reversed full permutation, into a fresh destination.
  HostRegion reversed(8, 64, 64, 7);
  const std::vector<unsigned char> reversed_before = reversed.bytes;
  const std::vector<uint32_t> forward = iota(0, 8), backward = {7, 6, 5, 4, 3, 2, 1, 0};
  const uint64_t h2 = t->start(transfer_of(source.desc(), reversed.desc(), forward, backward));
  EXPECT_EQ(wait(*t, h2).state, HW_TRANSFER_DONE);
  expect_copied(source, reversed, reversed_before, forward, backward);
}

TEST(HostCopyReal, TransfersQueuedBeforeTheFirstPollAllComplete) {
  TransportHarness t;
  HostRegion source(64, 1024, 1024, 8), destination(64, 1024, 1024, 9);
  const std::vector<unsigned char> before = destination.bytes;
  std::vector<std::vector<uint32_t>> s(16), d(16);
  std::vector<uint64_t> handles;
  for (uint32_t i = 0; i < 16; ++i) {
    s[i] = {i * 4, i * 4 + 1, i * 4 + 2, i * 4 + 3};
    d[i] = {63 - i * 4, 62 - i * 4, 61 - i * 4, 60 - i * 4};
    handles.push_back(t->start(transfer_of(source.desc(), destination.desc(), s[i], d[i], i)));
  }
  // Handles are distinct.
  for (size_t i = 1; i < handles.size(); ++i) EXPECT_NE(handles[i], handles[i - 1]);
  // Polled in reverse order of start.
  for (size_t i = handles.size(); i-- > 0;) EXPECT_EQ(wait(*t, handles[i]).state, HW_TRANSFER_DONE);
  std::vector<uint32_t> all_s, all_d;
  for (uint32_t i = 0; i < 16; ++i) {
    all_s.insert(all_s.end(), s[i].begin(), s[i].end());
    all_d.insert(all_d.end(), d[i].begin(), d[i].end());
  }
  expect_copied(source, destination, before, all_s, all_d);
}

TEST(HostCopyReal, ConcurrentTransfersFromSeveralThreadsAreByteExact) {
  TransportHarness t;
  constexpr uint32_t kThreads = 4, kTransfers = 25, kPer = 4, kBytes = 512;
  // One shared destination; each thread writes its own disjoint range of blocks from its own
  // source region, starting and polling on the same transport instance as the others.
  HostRegion destination(kThreads * kTransfers * kPer, kBytes, kBytes, 200);
  const std::vector<unsigned char> before = destination.bytes;
  std::vector<std::unique_ptr<HostRegion>> sources;
  for (uint32_t th = 0; th < kThreads; ++th) {
    sources.push_back(std::make_unique<HostRegion>(kTransfers * kPer, kBytes, kBytes, 10 + th));
  }
  std::atomic<int> not_done{0};
  std::vector<std::thread> threads;
  for (uint32_t th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      for (uint32_t k = 0; k < kTransfers; ++k) {
        // Source blocks in reverse order within the transfer, destination ascending.
        std::vector<uint32_t> s, d;
        for (uint32_t j = 0; j < kPer; ++j) {
          s.push_back(k * kPer + (kPer - 1 - j));
          d.push_back((th * kTransfers + k) * kPer + j);
        }
        const uint64_t handle =
            t->start(transfer_of(sources[th]->desc(), destination.desc(), s, d, th * 1000 + k));
        if (wait(*t, handle).state != HW_TRANSFER_DONE) ++not_done;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(not_done.load(), 0);
  for (uint32_t th = 0; th < kThreads; ++th) {
    for (uint32_t k = 0; k < kTransfers; ++k) {
      for (uint32_t j = 0; j < kPer; ++j) {
        const uint32_t dst = (th * kTransfers + k) * kPer + j;
        const uint32_t src = k * kPer + (kPer - 1 - j);
        ASSERT_EQ(destination.block(dst), sources[th]->block(src))
            << "thread " << th << " transfer " << k << " block " << j;
      }
    }
  }
}

TEST(HostCopyReal, DestroyingTheTransportWithTransfersQueuedDoesNotHang) {
  // The regions outlive the transport (block lists and memory are borrowed until completion).
  HostRegion source(64, 1 << 16, 1 << 16, 1), destination(64, 1 << 16, 1 << 16, 2);
  const std::vector<uint32_t> all = iota(0, 64);
  {
    TransportHarness t;
    for (int i = 0; i < 8; ++i) t->start(transfer_of(source.desc(), destination.desc(), all, all));
  }
  SUCCEED();
}

// -------------------------------------------------------------------------------------------------
// Failures
// -------------------------------------------------------------------------------------------------

TEST(HostCopyFailures, PollingAnUnknownHandleIsNotFound) {
  TransportHarness t;
  for (uint64_t handle : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, UINT64_MAX}) {
    Error e = error_of([&] { t->poll(handle); });
    EXPECT_EQ(e.code(), HW_NOT_FOUND) << handle;
    EXPECT_THAT(e.what(), HasSubstr("unknown transfer handle"));
  }
}

// A transfer that cannot be carried out must be refused at start or end in FAILED, never crash or
// report DONE; either way the destination is untouched when the first block is already bad.
void expect_fails_cleanly(TransportHarness& t, const hw_kv_transfer& transfer,
                          const HostRegion& destination, const std::vector<unsigned char>& before,
                          const std::string& what) {
  try {
    const uint64_t handle = t->start(transfer);
    EXPECT_EQ(wait(*t, handle).state, HW_TRANSFER_FAILED) << what;
  } catch (const Error& e) {
    EXPECT_NE(e.code(), HW_OK) << what;
  }
  EXPECT_EQ(destination.bytes, before) << what;
}

TEST(HostCopyFailures, MismatchedBlockSizesFailWithoutCopying) {
  TransportHarness t;
  HostRegion source(8, 64, 64, 1), destination(8, 128, 128, 2);
  const std::vector<unsigned char> before = destination.bytes;
  const std::vector<uint32_t> s = {0, 1}, d = {0, 1};
  expect_fails_cleanly(t, transfer_of(source.desc(), destination.desc(), s, d), destination, before,
                       "64-byte blocks into 128-byte blocks");
  // Today's behaviour: refused at start, naming both sizes.
  Error e = error_of([&] { t->start(transfer_of(source.desc(), destination.desc(), s, d)); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("64 vs 128"));
}

TEST(HostCopyFailures, OutOfRangeBlocksFailAndTheTransportKeepsWorking) {
  test::CapturedLog log;  // before the transport: its host's logger is made from the default one
  TransportHarness t;
  HostRegion source(8, 64, 64, 1), destination(8, 64, 64, 2);
  const std::vector<unsigned char> before = destination.bytes;
  const std::vector<uint32_t> past_source = {8}, zero = {0}, past_destination = {8},
                              far = {UINT32_MAX};
  {
    // The failure names the request, the side and the block, and what the region holds.
    expect_fails_cleanly(t, transfer_of(source.desc(), destination.desc(), past_source, zero, 41),
                         destination, before, "source block 8 of 8");
    expect_fails_cleanly(t,
                         transfer_of(source.desc(), destination.desc(), zero, past_destination, 42),
                         destination, before, "destination block 8 of 8");
    EXPECT_NE(log.text().find("request 41: source block 8 (entry 0 of 1) lies outside its KV "
                              "region of 8 blocks"),
              std::string::npos)
        << log.text();
    EXPECT_NE(log.text().find("request 42: destination block 8"), std::string::npos) << log.text();
  }
  expect_fails_cleanly(t, transfer_of(source.desc(), destination.desc(), far, zero), destination,
                       before, "source block UINT32_MAX");
  // A region whose declared size cuts the last block short.
  hw_memory_desc short_destination = destination.desc();
  short_destination.bytes = 8 * 64 - 1;
  const std::vector<uint32_t> last = {7};
  expect_fails_cleanly(t, transfer_of(source.desc(), short_destination, zero, last), destination,
                       before, "destination block 7 one byte short");

  // The worker survived: a good transfer still completes.
  const std::vector<uint32_t> s = {1}, d = {2};
  const uint64_t handle = t->start(transfer_of(source.desc(), destination.desc(), s, d));
  EXPECT_EQ(wait(*t, handle).state, HW_TRANSFER_DONE);
  expect_copied(source, destination, before, s, d);
}

TEST(HostCopyFailures, NullBlockListsAreRefused) {
  TransportHarness t;
  HostRegion source(8, 64, 64, 1), destination(8, 64, 64, 2);
  const std::vector<uint32_t> none;
  hw_kv_transfer transfer = transfer_of(source.desc(), destination.desc(), none, none);
  transfer.source_blocks = nullptr;
  transfer.destination_blocks = nullptr;
  transfer.block_count = 2;  // but no lists
  Error e = error_of([&] { t->start(transfer); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("NULL"));
}

// Device memory: a plugin built with CUDA copies it (byte-exactness is checked on a GPU by
// tests/gpu/host_copy_device_test.cpp); on a machine without a GPU its transfers fail, and the
// transport keeps copying host memory. A plugin built without CUDA refuses it at start().
TEST(HostCopyFailures, DeviceMemoryNeedsCudaAndAGpu) {
  TransportHarness t;
  HostRegion host(8, 64, 64, 1);
  std::vector<unsigned char> not_on_a_gpu(8 * 64);  // what a broken caller might pass
  const hw_memory_desc device{not_on_a_gpu.data(), 8 * 64, HW_MEMORY_DEVICE, 0, 64, 64};
  const std::vector<uint32_t> blocks = {0, 1};
  hw_memory_desc unknown = host.desc();
  unknown.kind = 7;
  Error e = error_of([&] { t->start(transfer_of(unknown, host.desc(), blocks, blocks)); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("source memory of unknown kind 7"));
  const std::vector<std::pair<hw_memory_desc, hw_memory_desc>> pairs = {
      {device, host.desc()}, {host.desc(), device}, {device, device}};
#if HEADWAY_HOST_COPY_CUDA
  hw_memory_desc no_id = device;
  no_id.device_id = -1;
  e = error_of([&] { t->start(transfer_of(host.desc(), no_id, blocks, blocks)); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("destination device memory without a device id"));
  if (std::filesystem::exists("/dev/nvidiactl")) {
    GTEST_SKIP() << "a GPU driver is present: tests/gpu covers device copies";
  }
  for (const auto& [source, destination] : pairs) {
    const uint64_t handle = t->start(transfer_of(source, destination, blocks, blocks));
    EXPECT_EQ(wait(*t, handle).state, HW_TRANSFER_FAILED);
  }
  HostRegion other(8, 64, 64, 2);
  const uint64_t handle = t->start(transfer_of(host.desc(), other.desc(), blocks, blocks));
  EXPECT_EQ(wait(*t, handle).state, HW_TRANSFER_DONE) << "host copies still work";
#else
  for (const auto& [source, destination] : pairs) {
    e = error_of([&] { t->start(transfer_of(source, destination, blocks, blocks)); });
    EXPECT_EQ(e.code(), HW_UNIMPLEMENTED);
    EXPECT_THAT(e.what(), HasSubstr("no CUDA"));
  }
#endif
}

TEST(HostCopyOptions, CustomLinkWithoutBandwidthIsRefused) {
  Error e = error_of([] { TransportHarness t("link = \"custom\""); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("bandwidth_gb_per_s"));
  EXPECT_THAT(e.what(), HasSubstr("test.toml: kv_transport"));
  e = error_of([] { TransportHarness t("link = \"custom\"\nlatency_us = 3.0"); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
}

TEST(HostCopyOptions, TheHostRefusesUnknownLinksAndOutOfRangeValues) {
  Error e = error_of([] { TransportHarness t("link = \"carrier_pigeon\""); });
  EXPECT_THAT(e.what(), HasSubstr("link"));
  EXPECT_THAT(e.what(), HasSubstr("nvlink"));  // lists what is allowed
  EXPECT_THAT(error_of([] { TransportHarness t("efficiency = 0.0"); }).what(),
              HasSubstr("efficiency"));
  EXPECT_THAT(error_of([] { TransportHarness t("links = 0"); }).what(), HasSubstr("links"));
}

}  // namespace
}  // namespace headway::core
