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

namespace headway::gpu_test {
namespace {

class Transport {
 public:
  Transport() : host_("kv_transport", &clock_) {
    const core::LoadedPlugin& plugin = test::built_plugins().load_path(
        std::filesystem::path(HEADWAY_PLUGIN_DIR) / "headway_kv_transport_nccl.so");
    toml::table table = toml::parse("timeout_s = 20.0", std::string_view("test.toml"));
    core::PluginChoice choice;
    choice.where = "test.toml: kv_transport";
    choice.plugin = &plugin;
    choice.options = std::make_shared<const core::PluginOptions>(core::PluginOptions::from_toml(
        *plugin.descriptor, &table, "test.toml: kv_transport.options"));
    transport_ = std::make_unique<core::KvTransportInstance>(choice, host_);
  }
  core::KvTransportInstance& operator*() { return *transport_; }

 private:
  core::VirtualClock clock_;
  core::HostServices host_;
  std::unique_ptr<core::KvTransportInstance> transport_;
};

core::KvTransportInstance::Progress wait(core::KvTransportInstance& t, uint64_t handle) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    auto p = t.poll(handle);
    if (p.state != HW_TRANSFER_PENDING) return p;
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "transfer still pending after 60 s";
      return p;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

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

// Fills `blocks` blocks with distinct bytes on `device`, copies a scrambled list to another buffer
// on `to`, and checks every copied block byte for byte.
void round_trip(int from, int to) {
  const uint64_t block = 4096, count = 16;
  std::vector<uint8_t> pattern(block * count);
  std::iota(pattern.begin(), pattern.end(), uint8_t{7});
  for (size_t i = 0; i < pattern.size(); i += block) pattern[i] = static_cast<uint8_t>(i / block);
  void* src = nullptr;
  void* dst = nullptr;
  check(cudaSetDevice(from), "cudaSetDevice");
  check(cudaMalloc(&src, pattern.size()), "cudaMalloc");
  check(cudaMemcpy(src, pattern.data(), pattern.size(), cudaMemcpyHostToDevice), "upload");
  check(cudaSetDevice(to), "cudaSetDevice");
  check(cudaMalloc(&dst, pattern.size()), "cudaMalloc");
  check(cudaMemset(dst, 0, pattern.size()), "cudaMemset");
  const std::vector<uint32_t> sb = {3, 0, 15, 7}, db = {1, 2, 14, 9};
  Transport transport;
  hw_kv_transfer t{sizeof(hw_kv_transfer),
                   1,
                   hw_memory_desc{src, pattern.size(), HW_MEMORY_DEVICE, from, block, block},
                   hw_memory_desc{dst, pattern.size(), HW_MEMORY_DEVICE, to, block, block},
                   sb.data(),
                   db.data(),
                   4,
                   0,
                   1};
  const auto p = wait(*transport, (*transport).start(t));
  ASSERT_EQ(p.state, HW_TRANSFER_DONE);
  EXPECT_GT(p.seconds, 0.0);
  std::vector<uint8_t> got(pattern.size());
  check(cudaMemcpy(got.data(), dst, got.size(), cudaMemcpyDeviceToHost), "download");
  for (size_t i = 0; i < sb.size(); ++i) {
    EXPECT_TRUE(std::equal(got.begin() + db[i] * block, got.begin() + (db[i] + 1) * block,
                           pattern.begin() + sb[i] * block))
        << "block " << sb[i] << " -> " << db[i];
  }
  EXPECT_EQ(got[0], 0) << "an untouched block was written";
  cudaFree(dst);
  check(cudaSetDevice(from), "cudaSetDevice");
  cudaFree(src);
}

TEST(NcclTransport, CopiesBlocksWithinOneGpu) {
  HW_SKIP_WITHOUT_CUDA();
  round_trip(0, 0);
}

TEST(NcclTransport, SendsBlocksBetweenTwoGpus) {
  HW_SKIP_WITHOUT_CUDA();
  int count = 0;
  cudaGetDeviceCount(&count);
  if (count < 2) {
    GTEST_SKIP() << "the NCCL transfer test needs 2 CUDA devices, " << count << " visible";
  }
  round_trip(0, 1);
  round_trip(1, 0);
}

}  // namespace
}  // namespace headway::gpu_test
