// What the GPU tests of the KV transports share: a transport plugin loaded from the build's plugin
// directory and driven through the C ABI (as core::Cluster drives it), waiting for a transfer, and
// a byte-exact round trip of scrambled block lists between two regions in GPU or host memory.
// Threading: test-thread only.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <toml++/toml.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../unit/test_support/built_plugins.h"
#include "gpu_test_support.h"

namespace headway::gpu_test {

class LoadedTransport {
 public:
  // `plugin_file`: e.g. "headway_kv_transport_nccl.so"; `options_toml`: its options table.
  LoadedTransport(const std::string& plugin_file, std::string_view options_toml)
      : host_("kv_transport", &clock_) {
    const core::LoadedPlugin& plugin =
        test::built_plugins().load_path(std::filesystem::path(HEADWAY_PLUGIN_DIR) / plugin_file);
    toml::table table = toml::parse(options_toml, std::string_view("test.toml"));
    core::PluginChoice choice;
    choice.where = "test.toml: kv_transport";
    choice.plugin = &plugin;
    choice.options = std::make_shared<const core::PluginOptions>(core::PluginOptions::from_toml(
        *plugin.descriptor, &table, "test.toml: kv_transport.options"));
    transport_ = std::make_unique<core::KvTransportInstance>(choice, host_);
  }
  core::KvTransportInstance& operator*() { return *transport_; }
  // What the plugin counted through its host (e.g. host_copy_pinned_links).
  std::map<std::string, double> counters() const { return host_.counters(); }

 private:
  core::VirtualClock clock_;
  core::HostServices host_;
  std::unique_ptr<core::KvTransportInstance> transport_;
};

// Polls until the transfer leaves PENDING (60 s: a hang guard, not a timing expectation).
inline core::KvTransportInstance::Progress wait(core::KvTransportInstance& t, uint64_t handle) {
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

// `count` blocks of `block` bytes on GPU `device`, or in host memory when device < 0.
class BlockRegion {
 public:
  BlockRegion(int device, uint64_t block, uint64_t count)
      : device_(device), block_(block), bytes_(block * count) {
    if (device < 0) {
      host_.assign(bytes_, 0);
      return;
    }
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaMalloc(&device_bytes_, bytes_), "cudaMalloc");
    check(cudaMemset(device_bytes_, 0, bytes_), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  ~BlockRegion() {
    if (device_bytes_ != nullptr) {
      cudaSetDevice(device_);
      cudaFree(device_bytes_);
    }
  }
  BlockRegion(const BlockRegion&) = delete;
  BlockRegion& operator=(const BlockRegion&) = delete;

  void fill(const std::vector<uint8_t>& bytes) {
    if (device_ < 0) {
      host_ = bytes;
      return;
    }
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaMemcpy(device_bytes_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "upload");
    // From pageable memory cudaMemcpy may return before the DMA lands, and the transports copy on
    // non-blocking streams, which do not wait for the legacy stream.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::vector<uint8_t> read() const {
    if (device_ < 0) return host_;
    std::vector<uint8_t> out(bytes_);
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaMemcpy(out.data(), device_bytes_, out.size(), cudaMemcpyDeviceToHost), "download");
    return out;
  }
  hw_memory_desc desc() {
    void* base = device_ < 0 ? static_cast<void*>(host_.data()) : device_bytes_;
    return hw_memory_desc{base,    bytes_, device_ < 0 ? HW_MEMORY_HOST : HW_MEMORY_DEVICE,
                          device_, block_, block_};
  }

 private:
  int device_;
  uint64_t block_;
  uint64_t bytes_;
  std::vector<uint8_t> host_;
  void* device_bytes_ = nullptr;
};

// Copies a scrambled list of 4 of 16 blocks of `block` bytes from a region on `from` to one on
// `to` (a device, or -1 for host memory) with `transport`, and checks every copied block byte for
// byte and an untouched one.
inline void round_trip(core::KvTransportInstance& transport, int from, int to,
                       uint64_t block = 4096) {
  constexpr uint64_t kCount = 16;
  std::vector<uint8_t> pattern(block * kCount);
  std::iota(pattern.begin(), pattern.end(), uint8_t{7});
  for (size_t i = 0; i < pattern.size(); i += block) pattern[i] = static_cast<uint8_t>(i / block);
  BlockRegion source(from, block, kCount), destination(to, block, kCount);
  source.fill(pattern);
  const std::vector<uint32_t> sb = {3, 0, 15, 7}, db = {1, 2, 14, 9};
  const hw_kv_transfer t{
      sizeof(hw_kv_transfer), 1, source.desc(), destination.desc(), sb.data(), db.data(), 4, 0, 1};
  const auto p = wait(transport, transport.start(t));
  ASSERT_EQ(p.state, HW_TRANSFER_DONE);
  EXPECT_GT(p.seconds, 0.0);
  const std::vector<uint8_t> got = destination.read();
  for (size_t i = 0; i < sb.size(); ++i) {
    EXPECT_TRUE(std::equal(got.begin() + db[i] * block, got.begin() + (db[i] + 1) * block,
                           pattern.begin() + sb[i] * block))
        << "block " << sb[i] << " -> " << db[i];
  }
  EXPECT_EQ(got[0], 0) << "an untouched block was written";
}

// Devices visible (0 where the runtime sees none).
inline int visible_devices() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

}  // namespace headway::gpu_test
