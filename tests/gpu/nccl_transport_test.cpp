// The nccl KV transport through the registry and the C ABI (as core::Cluster drives it): bad
// descriptors are rejected on any machine; a same-GPU copy needs one device; NCCL send/recv
// between two GPUs needs two (each test skips, saying why, where they are missing).
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

}  // namespace
}  // namespace headway::gpu_test
