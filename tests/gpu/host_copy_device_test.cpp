// host_copy with KV in GPU memory (plugins/kv_transports/host_copy/device_copy.h): scrambled block
// lists land byte for byte host -> GPU, GPU -> host, within one GPU and, through the pinned host
// buffer, between two GPUs (also several batches of it, and blocks larger than it); and over a
// peer link (peer_link.h: rings in shared memory, pinned), GPU -> ring -> GPU between two
// instances that stand for two processes. Each test skips, saying why, where the devices are
// missing.
#include <gtest/gtest.h>

#include "gpu_test_support.h"
#include "transport_harness.h"

namespace headway::gpu_test {
namespace {

class HostCopy : public LoadedTransport {
 public:
  HostCopy() : LoadedTransport("headway_kv_transport_host_copy.so", "") {}
};

TEST(HostCopyDevice, HostToGpuAndBack) {
  HW_SKIP_WITHOUT_CUDA();
  HostCopy transport;
  round_trip(*transport, -1, 0);
  round_trip(*transport, 0, -1);
}

TEST(HostCopyDevice, WithinOneGpu) {
  HW_SKIP_WITHOUT_CUDA();
  HostCopy transport;
  round_trip(*transport, 0, 0);
}

TEST(HostCopyDevice, BetweenTwoGpusThroughPinnedHostMemory) {
  HW_SKIP_WITHOUT_CUDA();
  const int count = visible_devices();
  if (count < 2)
    GTEST_SKIP() << "a copy between GPUs needs 2 CUDA devices, " << count << " visible";
  HostCopy transport;
  round_trip(*transport, 0, 1);
  round_trip(*transport, 1, 0);
  // 4 blocks of 8 MiB: two batches through the 16 MiB buffer; of 20 MiB: each block in pieces.
  round_trip(*transport, 0, 1, uint64_t{8} << 20);
  round_trip(*transport, 1, 0, uint64_t{20} << 20);
}

// Two instances (two engine processes' transports) joined on one link for device memory: a 2 MiB
// ring per direction, so 24 blocks of 1 MiB stream through it; scrambled lists, byte for byte.
TEST(HostCopyDevice, PeerLinkMovesGpuKvThroughPinnedSharedRings) {
  HW_SKIP_WITHOUT_CUDA();
  const int devices = visible_devices();
  const int to = devices > 1 ? 1 : 0;
  LoadedTransport prefill("headway_kv_transport_host_copy.so", "peer_link_buffer_mb = 2");
  LoadedTransport decode("headway_kv_transport_host_copy.so", "peer_link_buffer_mb = 2");
  constexpr uint64_t kBlock = uint64_t{1} << 20;
  constexpr uint64_t kCount = 32;
  std::vector<uint8_t> pattern(kBlock * kCount);
  for (size_t i = 0; i < pattern.size(); ++i) {
    pattern[i] = static_cast<uint8_t>(i / kBlock * 29 + i % 251);
  }
  BlockRegion source(0, kBlock, kCount), destination(to, kBlock, kCount);
  source.fill(pattern);
  const std::vector<uint8_t> id = (*decode).peer_rendezvous();
  const uint64_t receiving = (*decode).peer_join(id, 1, destination.desc());
  const uint64_t sending = (*prefill).peer_join(id, 0, source.desc());
  std::vector<uint32_t> from(24), into(24);
  for (uint32_t i = 0; i < 24; ++i) {
    from[i] = (i * 5) % kCount;
    into[i] = (i * 7 + 3) % kCount;
  }
  const uint64_t receive =
      (*decode).peer_post(receiving, HW_PEER_RECEIVE, destination.desc(), into);
  const uint64_t send = (*prefill).peer_post(sending, HW_PEER_SEND, source.desc(), from);
  EXPECT_EQ(wait(*prefill, send).state, HW_TRANSFER_DONE);
  EXPECT_EQ(wait(*decode, receive).state, HW_TRANSFER_DONE);
  const std::vector<uint8_t> got = destination.read();
  for (size_t i = 0; i < from.size(); ++i) {
    EXPECT_TRUE(std::equal(got.begin() + into[i] * kBlock, got.begin() + (into[i] + 1) * kBlock,
                           pattern.begin() + from[i] * kBlock))
        << "block " << from[i] << " -> " << into[i];
  }
  (*decode).peer_close(receiving);
  (*prefill).peer_close(sending);
  // The rings were pinned: a refused cudaHostRegister falls back to pageable copies (a warning),
  // which would move the same bytes without testing the pinned path.
  for (LoadedTransport* side : {&prefill, &decode}) {
    EXPECT_EQ(side->counters()["host_copy_pageable_links"], 0.0)
        << "cudaHostRegister refused the ring: the pinned path was not tested on this machine";
    EXPECT_EQ(side->counters()["host_copy_pinned_links"], 1.0);
  }
}

}  // namespace
}  // namespace headway::gpu_test
