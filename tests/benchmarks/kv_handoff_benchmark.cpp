// What it costs to move one request's KV (host memory) from a prefill process to a decode process
// on one host, by the two hand-offs of docs/serving.md:
// - BM_StagedHandoff: kv_handoff = "stage" — the prefill side writes the blocks into a new POSIX
//   shared-memory object (created, sized and faulted in per request), the decode side maps it,
//   copies the blocks out and removes it.
// - BM_SharedMemoryLinkHandoff: kv_handoff = "link" with host_copy — a send and its receive over
//   a link joined once, streaming through its two 16 MiB rings.
// Both ends run in this process (the bytes take the same path as between two). Argument: the KV's
// size in MiB, in blocks of 2 MiB (16 tokens of Llama-3.1-8B at 128 KiB per token).
#include <benchmark/benchmark.h>
#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kv_stage_file.h"

namespace {

using headway::core::KvTransportInstance;

constexpr uint64_t kBlockBytes = uint64_t{2} << 20;
constexpr uint32_t kBlockSize = 16;  // tokens per block

struct KvRegion {
  explicit KvRegion(uint32_t blocks) : bytes(blocks * kBlockBytes) {
    for (size_t i = 0; i < bytes.size(); i += 4096) bytes[i] = static_cast<unsigned char>(i >> 12);
  }
  hw_memory_desc memory() {
    return hw_memory_desc{bytes.data(), bytes.size(), HW_MEMORY_HOST, -1, kBlockBytes, kBlockBytes};
  }
  std::vector<unsigned char> bytes;
};

std::vector<uint32_t> block_list(uint32_t blocks) {
  std::vector<uint32_t> list(blocks);
  for (uint32_t b = 0; b < blocks; ++b) list[b] = (b * 7) % blocks;  // scattered, as in a pool
  return list;
}

void BM_StagedHandoff(benchmark::State& state) {
  const auto blocks = static_cast<uint32_t>(state.range(0) * (1 << 20) / kBlockBytes);
  KvRegion prefill(blocks), decode(blocks);
  const std::vector<uint32_t> list = block_list(blocks);
  uint64_t request = 0;
  for (auto _ : state) {
    const headway::serving::KvStage stage =
        headway::serving::write_kv_stage(headway::serving::kv_stage_name(0, request++),
                                         prefill.memory(), list, blocks * kBlockSize, kBlockSize);
    const std::string error = headway::serving::read_kv_stage(stage, decode.memory(), list);
    headway::serving::discard_kv_stage(stage.shm_name);
    if (!error.empty()) state.SkipWithError(error.c_str());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * blocks * kBlockBytes);
}

// A host_copy transport as core::Cluster creates it, with its default options.
class HostCopy {
 public:
  HostCopy() : host_("kv_transport", &clock_) {
    static headway::core::PluginRegistry* registry = new headway::core::PluginRegistry();
    const headway::core::LoadedPlugin& plugin = registry->load_path(
        std::filesystem::path(HEADWAY_PLUGIN_DIR) / "headway_kv_transport_host_copy.so");
    headway::core::PluginChoice choice;
    choice.where = "kv_handoff_benchmark";
    choice.plugin = &plugin;
    choice.options = std::make_shared<const headway::core::PluginOptions>(
        headway::core::PluginOptions::from_toml(*plugin.descriptor, nullptr, choice.where));
    transport = std::make_unique<KvTransportInstance>(choice, host_);
  }
  std::unique_ptr<KvTransportInstance> transport;

 private:
  headway::core::VirtualClock clock_;
  headway::core::HostServices host_;
};

bool finished(KvTransportInstance& transport, uint64_t handle) {
  const int32_t state = transport.poll(handle).state;
  if (state == HW_TRANSFER_FAILED) throw std::runtime_error("a link transfer failed");
  return state == HW_TRANSFER_DONE;
}

void BM_SharedMemoryLinkHandoff(benchmark::State& state) {
  const auto blocks = static_cast<uint32_t>(state.range(0) * (1 << 20) / kBlockBytes);
  KvRegion prefill(blocks), decode(blocks);
  const std::vector<uint32_t> list = block_list(blocks);
  HostCopy prefill_side, decode_side;
  const std::vector<uint8_t> id = decode_side.transport->peer_rendezvous();
  const uint64_t receiving = decode_side.transport->peer_join(id, 1, decode.memory());
  const uint64_t sending = prefill_side.transport->peer_join(id, 0, prefill.memory());
  while (decode_side.transport->peer_state(receiving) == HW_TRANSFER_PENDING ||
         prefill_side.transport->peer_state(sending) == HW_TRANSFER_PENDING) {
  }
  for (auto _ : state) {
    const uint64_t receive =
        decode_side.transport->peer_post(receiving, HW_PEER_RECEIVE, decode.memory(), list);
    const uint64_t send =
        prefill_side.transport->peer_post(sending, HW_PEER_SEND, prefill.memory(), list);
    bool sent = false, received = false;
    while (!sent || !received) {
      sent = sent || finished(*prefill_side.transport, send);
      received = received || finished(*decode_side.transport, receive);
    }
  }
  if (decode.bytes != prefill.bytes) state.SkipWithError("the KV arrived changed");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * blocks * kBlockBytes);
}

BENCHMARK(BM_StagedHandoff)
    ->Arg(16)
    ->Arg(128)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_SharedMemoryLinkHandoff)
    ->Arg(16)
    ->Arg(128)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
