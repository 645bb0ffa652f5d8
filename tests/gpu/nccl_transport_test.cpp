// The nccl KV transport through the registry and the C ABI (as core::Cluster drives it): bad
// descriptors are rejected on any machine; a same-GPU copy, and its timeouts (a copy that times out
// fails once it stopped writing and the link is made again; one queued behind others is timed
// from its own start), need one device; NCCL send/recv between two GPUs, in one process or over a
// peer link (KV between processes), needs two (each test skips, saying why, where they are
// missing).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <toml++/toml.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../unit/test_support/built_plugins.h"
#include "gpu_test_support.h"
#include "transport_harness.h"

namespace headway::gpu_test {
namespace {

// The nccl plugin as core::Cluster loads it.
class Transport : public LoadedTransport {
 public:
  Transport() : LoadedTransport("headway_kv_transport_nccl.so", "timeout_s = 20.0") {}
};

TEST(NcclTransport, RejectsHostMemoryAndBlocksOutsideTheRegion) {
  Transport transport;
  std::vector<std::byte> host(1024);
  const uint32_t blocks[] = {0, 3};
  hw_kv_transfer t{sizeof(hw_kv_transfer),
                   1,
                   hw_memory_desc{host.data(), 1024, HW_MEMORY_HOST, -1, 256, 256},
                   hw_memory_desc{host.data(), 1024, HW_MEMORY_HOST, -1, 256, 256},
                   blocks,
                   blocks,
                   2,
                   0,
                   1};
  try {
    (*transport).start(t);
    FAIL() << "host memory should be rejected";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("source memory is not on a GPU"), std::string::npos)
        << e.what();
  }
  // A fake device descriptor (never dereferenced: validation comes first).
  t.source = hw_memory_desc{host.data(), 1024, HW_MEMORY_DEVICE, 0, 256, 256};
  t.destination = t.source;
  const uint32_t beyond[] = {0, 4};
  t.destination_blocks = beyond;
  try {
    (*transport).start(t);
    FAIL() << "a block beyond the region should be rejected";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("destination block 4 (entry 1) lies beyond its region"),
              std::string::npos)
        << e.what();
  }
}

TEST(NcclTransport, CopiesBlocksWithinOneGpu) {
  HW_SKIP_WITHOUT_CUDA();
  Transport transport;
  round_trip(*transport, 0, 0);
}

// `count` blocks of `block` bytes on GPU 0, every byte `value`: regions of GiB, which no host
// vector mirrors.
class LargeRegion {
 public:
  LargeRegion(uint64_t block, uint64_t count, uint8_t value)
      : block_(block), bytes_(block * count) {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaMalloc(&base_, bytes_), "cudaMalloc");
    check(cudaMemset(base_, value, bytes_), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  ~LargeRegion() { cudaFree(base_); }
  LargeRegion(const LargeRegion&) = delete;
  LargeRegion& operator=(const LargeRegion&) = delete;
  hw_memory_desc desc() const {
    return hw_memory_desc{base_, bytes_, HW_MEMORY_DEVICE, 0, block_, block_};
  }
  // `bytes` from `offset`, read on the legacy stream: it does not wait for the transport's
  // non-blocking streams, so it sees what a copy has written so far.
  std::vector<uint8_t> read(uint64_t offset, uint64_t bytes) const {
    std::vector<uint8_t> out(bytes);
    check(cudaMemcpy(out.data(), static_cast<const uint8_t*>(base_) + offset, bytes,
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy D2H");
    return out;
  }

 private:
  uint64_t block_;
  uint64_t bytes_;
  void* base_ = nullptr;
};

// 128 blocks of 64 MiB (8 GiB): a same-GPU copy of all of them reads and writes 16 GiB, 3.6 ms at
// an H200's 4.8 TB/s and some 5-8 ms as cudaMemcpyAsync runs on an H100 or H200.
constexpr uint64_t kLargeBlock = uint64_t{64} << 20;
constexpr uint32_t kLargeCount = 128;

hw_kv_transfer whole_region(const LargeRegion& from, const LargeRegion& to,
                            const std::vector<uint32_t>& blocks) {
  return hw_kv_transfer{sizeof(hw_kv_transfer),
                        1,
                        from.desc(),
                        to.desc(),
                        blocks.data(),
                        blocks.data(),
                        static_cast<uint32_t>(blocks.size()),
                        0,
                        1};
}

// A same-GPU copy that times out (1 ms, for 8 GiB) reports FAILED only once it stopped writing:
// nothing aborts a cudaMemcpyAsync, so the transport waits for the link's stream before it reports
// (the host frees or reuses the blocks of a FAILED transfer). The last block is whole when poll()
// answers. The broken link is then made again by the next start() between the same GPUs, which
// copies as before.
TEST(NcclTransport, ATimedOutCopyFailsOnlyOnceItStoppedWritingAndTheLinkIsMadeAgain) {
  HW_SKIP_WITHOUT_CUDA();
  LoadedTransport transport("headway_kv_transport_nccl.so", "timeout_s = 0.001");
  LargeRegion source(kLargeBlock, kLargeCount, 0x5a), destination(kLargeBlock, kLargeCount, 0);
  std::vector<uint32_t> blocks(kLargeCount);
  std::iota(blocks.begin(), blocks.end(), 0u);
  const auto p = wait(*transport, (*transport).start(whole_region(source, destination, blocks)));
  ASSERT_EQ(p.state, HW_TRANSFER_FAILED) << "16 GiB of copying within 1 ms?";
  EXPECT_EQ(destination.read(kLargeBlock * kLargeCount - 4096, 4096),
            std::vector<uint8_t>(4096, 0x5a))
      << "the copy was still writing when its transfer reported FAILED";
  // Small enough for the 1 ms timeout, which counts from the copy's start on the link's stream.
  round_trip(*transport, 0, 0);
}

// A transfer queued behind others on its link's stream is timed from when the stream reaches it,
// not from its start(): twelve 8 GiB copies (each well within the 20 ms timeout, together 40 ms
// or more), then a small one, all DONE.
TEST(NcclTransport, ATransferQueuedBehindOthersIsTimedFromItsOwnStart) {
  HW_SKIP_WITHOUT_CUDA();
  LoadedTransport transport("headway_kv_transport_nccl.so", "timeout_s = 0.02");
  LargeRegion source(kLargeBlock, kLargeCount, 0x5a), destination(kLargeBlock, kLargeCount, 0);
  std::vector<uint32_t> all(kLargeCount);
  std::iota(all.begin(), all.end(), 0u);
  const std::vector<uint32_t> one = {7};
  std::vector<uint64_t> handles;
  for (int i = 0; i < 12; ++i) {
    handles.push_back((*transport).start(whole_region(source, destination, all)));
  }
  handles.push_back((*transport).start(whole_region(source, destination, one)));
  // Poll every one of them, as the cluster does, until none is pending.
  std::vector<hw_transfer_state> states(handles.size(), HW_TRANSFER_PENDING);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t pending = handles.size(); pending > 0;) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << pending << " transfers still pending";
    pending = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
      if (states[i] != HW_TRANSFER_PENDING) continue;
      states[i] = static_cast<hw_transfer_state>((*transport).poll(handles[i]).state);
      pending += states[i] == HW_TRANSFER_PENDING ? 1 : 0;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    EXPECT_EQ(states[i], HW_TRANSFER_DONE) << "transfer " << i << " of " << handles.size();
  }
  EXPECT_EQ(destination.read(kLargeBlock * 8 - 4096, 4096), std::vector<uint8_t>(4096, 0x5a));
}

TEST(NcclTransport, SendsBlocksBetweenTwoGpus) {
  HW_SKIP_WITHOUT_CUDA();
  const int count = visible_devices();
  if (count < 2) {
    GTEST_SKIP() << "the NCCL transfer test needs 2 CUDA devices, " << count << " visible";
  }
  Transport transport;
  round_trip(*transport, 0, 1);
  round_trip(*transport, 1, 0);
}

// Peer links (KV between processes): host memory is refused on any machine, naming why.
TEST(NcclTransport, PeerLinksRefuseHostMemory) {
  Transport transport;
  ASSERT_TRUE((*transport).has_peer_links());
  const std::vector<uint8_t> id(128, 1);
  hw_memory_desc host{nullptr, 0, HW_MEMORY_HOST, -1, 256, 256};
  try {
    (*transport).peer_join(id, 0, host);
    FAIL() << "a link for host memory should be refused";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  }
}

// Two transport instances stand for two engine processes (one GPU each), joined by a rendezvous
// as kv_links.h joins them: the decode side makes the id and joins as rank 1, the prefill side
// joins as rank 0; the prefill side posts its send before the decode side posts the receive (the
// order SendHeldKv makes), twice on one link to check the matching order. NCCL cannot put two
// ranks of one communicator on one GPU, so this needs two.
TEST(NcclTransport, PeerLinkCarriesBlocksInPostingOrder) {
  HW_SKIP_WITHOUT_CUDA();
  const int count = visible_devices();
  if (count < 2) {
    GTEST_SKIP() << "the NCCL peer-link test needs 2 CUDA devices, " << count << " visible";
  }
  Transport prefill, decode;
  constexpr uint64_t kBlock = 8192, kCount = 16;
  BlockRegion held(0, kBlock, kCount), reserved(1, kBlock, kCount);
  std::vector<uint8_t> pattern(kBlock * kCount);
  for (size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = static_cast<uint8_t>(i * 31 / kBlock + i);
  held.fill(pattern);
  const std::vector<uint8_t> id = (*decode).peer_rendezvous();
  const uint64_t decode_link = (*decode).peer_join(id, 1, reserved.desc());
  const uint64_t prefill_link = (*prefill).peer_join(id, 0, held.desc());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((*decode).peer_state(decode_link) == HW_TRANSFER_PENDING ||
         (*prefill).peer_state(prefill_link) == HW_TRANSFER_PENDING) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the link did not come up";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ((*decode).peer_state(decode_link), HW_TRANSFER_DONE);
  ASSERT_EQ((*prefill).peer_state(prefill_link), HW_TRANSFER_DONE);
  const std::vector<uint32_t> first_from = {3, 0, 15}, first_to = {1, 2, 14};
  const std::vector<uint32_t> second_from = {7, 8}, second_to = {9, 4};
  std::vector<uint64_t> sends, receives;
  for (const auto* blocks : {&first_from, &second_from}) {
    sends.push_back((*prefill).peer_post(prefill_link, HW_PEER_SEND, held.desc(), *blocks));
  }
  for (const auto* blocks : {&first_to, &second_to}) {
    receives.push_back((*decode).peer_post(decode_link, HW_PEER_RECEIVE, reserved.desc(), *blocks));
  }
  for (uint64_t handle : sends) EXPECT_EQ(wait(*prefill, handle).state, HW_TRANSFER_DONE);
  for (uint64_t handle : receives) EXPECT_EQ(wait(*decode, handle).state, HW_TRANSFER_DONE);
  const std::vector<uint8_t> got = reserved.read();
  const auto same = [&](uint32_t from, uint32_t to) {
    return std::equal(got.begin() + to * kBlock, got.begin() + (to + 1) * kBlock,
                      pattern.begin() + from * kBlock);
  };
  for (size_t i = 0; i < first_from.size(); ++i) EXPECT_TRUE(same(first_from[i], first_to[i])) << i;
  for (size_t i = 0; i < second_from.size(); ++i) {
    EXPECT_TRUE(same(second_from[i], second_to[i])) << i;
  }
  (*prefill).peer_close(prefill_link);
  (*decode).peer_close(decode_link);
}

}  // namespace
}  // namespace headway::gpu_test
