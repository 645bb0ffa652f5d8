// host_copy with KV in GPU memory (plugins/kv_transports/host_copy/device_copy.h): scrambled block
// lists land byte for byte host -> GPU, GPU -> host, within one GPU and, through the pinned host
// buffer, between two GPUs (also several batches of it, and blocks larger than it). Each test
// skips, saying why, where the devices are missing.
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

}  // namespace
}  // namespace headway::gpu_test
