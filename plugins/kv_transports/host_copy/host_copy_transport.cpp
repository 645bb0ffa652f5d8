// KV transport that moves blocks between engines of one process through host memory.
//
// Two modes, chosen per transfer by the memory it is given:
// - real bytes: the blocks are copied by a worker thread, so transfers overlap with the engines'
//   steps; the duration reported is the measured copy time. Host to host with memcpy; when either
//   side is GPU memory (builds with CUDA only, device_copy.h) with cudaMemcpyAsync on dedicated
//   streams, through a pinned host buffer between two GPUs;
// - simulated (either side NONE, as with the sim model): nothing is copied and the duration comes
//   from a bandwidth + latency model of the link the deployment names (presets below), which the
//   simulator adds to the virtual clock.
// Threading: start() and poll() may be called from any thread; one mutex guards the job table and
// is never held while bytes are copied.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <headway/plugin.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#if HEADWAY_HOST_COPY_CUDA
#include "device_copy.h"
#endif

namespace {

using headway::sdk::Error;

constexpr hw_str kLinks[] = {headway::sdk::make_str("nvlink"),  headway::sdk::make_str("pcie5"),
                             headway::sdk::make_str("rdma100"), headway::sdk::make_str("rdma400"),
                             headway::sdk::make_str("tcp"),     headway::sdk::make_str("custom")};

constexpr hw_option_spec kOptions[] = {
    headway::sdk::enum_option("link", "pcie5", kLinks,
                              "Link model for simulated transfers: nvlink (450 GB/s per direction, "
                              "5 us), pcie5 (x16, 64 GB/s, 10 us), rdma100 (12.5 GB/s, 10 us), "
                              "rdma400 (50 GB/s, 10 us), tcp (25 Gb/s, 50 us), custom."),
    headway::sdk::double_option("bandwidth_gb_per_s", 0.0, 0.0, 1e6,
                                "Bandwidth of one link in GB/s, one direction; 0 = the preset's "
                                "(required with link = custom)."),
    headway::sdk::double_option("latency_us", -1.0, -1.0, 1e7,
                                "Fixed cost of one transfer in microseconds; -1 = the preset's."),
    headway::sdk::int_option("links", 1, 1, 1024,
                             "Links used in parallel by one transfer (e.g. one per GPU of a "
                             "tensor-parallel group)."),
    headway::sdk::double_option("efficiency", 0.8, 0.01, 1.0,
                                "Fraction of the link's bandwidth a transfer achieves."),
};

struct LinkPreset {
  const char* name;
  double gb_per_s;
  double latency_us;
};
constexpr LinkPreset kPresets[] = {{"nvlink", 450.0, 5.0},
                                   {"pcie5", 64.0, 10.0},
                                   {"rdma100", 12.5, 10.0},
                                   {"rdma400", 50.0, 10.0},
                                   {"tcp", 3.125, 50.0}};

class HostCopyTransport final : public headway::sdk::KvTransport {
 public:
  HostCopyTransport(const headway::sdk::Host& host, const headway::sdk::Options& options)
      : host_(host) {
    const std::string link = options.get_string("link");
    double gb_per_s = options.get_double("bandwidth_gb_per_s");
    double latency_us = options.get_double("latency_us");
    for (const LinkPreset& p : kPresets) {
      if (link == p.name) {
        if (gb_per_s == 0.0) gb_per_s = p.gb_per_s;
        if (latency_us < 0.0) latency_us = p.latency_us;
      }
    }
    if (gb_per_s <= 0.0) {
      throw Error(HW_INVALID_ARGUMENT, "host_copy: link = \"custom\" needs bandwidth_gb_per_s > 0");
    }
    if (latency_us < 0.0) latency_us = 0.0;
    bytes_per_s_ = gb_per_s * 1e9 * options.get_double("efficiency") *
                   static_cast<double>(options.get_int("links"));
    latency_s_ = latency_us * 1e-6;
  }

  ~HostCopyTransport() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  uint64_t start(const hw_kv_transfer& t) override {
    const bool simulated = t.source.kind == HW_MEMORY_NONE || t.destination.kind == HW_MEMORY_NONE;
    if (!simulated) {
      check_memory(t.source, "source");
      check_memory(t.destination, "destination");
    }
    if (t.block_count > 0 && (t.source_blocks == nullptr || t.destination_blocks == nullptr)) {
      throw Error(HW_INVALID_ARGUMENT, "host_copy: block lists are NULL");
    }
    if (!simulated && t.source.block_bytes == 0) {
      throw Error(HW_INVALID_ARGUMENT, "host_copy: blocks of 0 bytes");
    }
    if (!simulated && t.source.block_bytes != t.destination.block_bytes) {
      throw Error(HW_INVALID_ARGUMENT, "host_copy: source and destination blocks differ in size (" +
                                           std::to_string(t.source.block_bytes) + " vs " +
                                           std::to_string(t.destination.block_bytes) + " bytes)");
    }
    std::lock_guard lock(mutex_);
    const uint64_t handle = next_handle_++;
    Job& job = jobs_[handle];
    job.transfer = t;
    if (simulated) {
      const double bytes =
          static_cast<double>(t.block_count) * static_cast<double>(t.source.block_bytes);
      job.state = HW_TRANSFER_DONE;
      job.seconds = latency_s_ + bytes / bytes_per_s_;
      return handle;
    }
    job.state = HW_TRANSFER_PENDING;
    queue_.push_back(handle);
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    wake_.notify_one();
    return handle;
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    std::lock_guard lock(mutex_);
    auto it = jobs_.find(handle);
    if (it == jobs_.end()) {
      throw Error(HW_NOT_FOUND, "host_copy: unknown transfer handle " + std::to_string(handle));
    }
    headway::sdk::TransferProgress progress{it->second.state, it->second.seconds};
    if (progress.state != HW_TRANSFER_PENDING) jobs_.erase(it);  // reported once, then forgotten
    return progress;
  }

 private:
  struct Job {
    hw_kv_transfer transfer{};
    hw_transfer_state state = HW_TRANSFER_PENDING;
    double seconds = 0.0;
  };

  // Copies queued transfers one at a time, outside the lock.
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      const uint64_t handle = queue_.front();
      queue_.pop_front();
      const hw_kv_transfer t = jobs_[handle].transfer;
      lock.unlock();
      const auto begin = std::chrono::steady_clock::now();
      const std::string error = copy(t);
      const bool ok = error.empty();
      if (!ok)
        host_.log(HW_LOG_WARN,
                  "host_copy: transfer " + std::to_string(handle) + " failed: " + error);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      lock.lock();
      Job& job = jobs_[handle];
      job.state = ok ? HW_TRANSFER_DONE : HW_TRANSFER_FAILED;
      job.seconds = seconds;
    }
  }

  // HOST anywhere; DEVICE (with a device id) only where the plugin was built with CUDA.
  static void check_memory(const hw_memory_desc& m, const char* side) {
    if (m.kind == HW_MEMORY_HOST) return;
    if (m.kind != HW_MEMORY_DEVICE) {
      throw Error(HW_INVALID_ARGUMENT, std::string("host_copy: ") + side +
                                           " memory of unknown kind " + std::to_string(m.kind));
    }
#if HEADWAY_HOST_COPY_CUDA
    if (m.device_id < 0) {
      throw Error(HW_INVALID_ARGUMENT, std::string("host_copy: ") + side +
                                           " device memory without a device id (" +
                                           std::to_string(m.device_id) + ")");
    }
#else
    throw Error(HW_UNIMPLEMENTED, std::string("host_copy: ") + side +
                                      " is device memory, and this build of the plugin has no "
                                      "CUDA (configure with HEADWAY_CUDA=ON)");
#endif
  }

  // Every block lies inside its region (checked before any byte moves); then the copy. Returns
  // what failed, or an empty string. Worker thread only.
  std::string copy(const hw_kv_transfer& t) {
    const uint64_t block = t.source.block_bytes;
    for (uint32_t i = 0; i < t.block_count; ++i) {
      const uint64_t from = t.source_blocks[i] * t.source.block_stride;
      const uint64_t to = t.destination_blocks[i] * t.destination.block_stride;
      if (from + block > t.source.bytes || to + block > t.destination.bytes) {
        return "block " + std::to_string(i) + " lies outside its KV region";
      }
    }
#if HEADWAY_HOST_COPY_CUDA
    if (t.source.kind == HW_MEMORY_DEVICE || t.destination.kind == HW_MEMORY_DEVICE) {
      return device_copier_.copy(t);
    }
#endif
    const auto* src = static_cast<const unsigned char*>(t.source.base);
    auto* dst = static_cast<unsigned char*>(t.destination.base);
    for (uint32_t i = 0; i < t.block_count; ++i) {
      std::memcpy(dst + t.destination_blocks[i] * t.destination.block_stride,
                  src + t.source_blocks[i] * t.source.block_stride, block);
    }
    return {};
  }

  const headway::sdk::Host host_;
#if HEADWAY_HOST_COPY_CUDA
  headway::kv_transports::host_copy::DeviceCopier device_copier_;  // the worker thread's
#endif
  double bytes_per_s_ = 0.0;
  double latency_s_ = 0.0;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::unordered_map<uint64_t, Job> jobs_;
  std::deque<uint64_t> queue_;
  uint64_t next_handle_ = 1;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(HostCopyTransport, "org.headway.kv_transport.host_copy", "host_copy",
                            "0.2.0",
                            "Moves KV blocks between engines of one process: host memory, or GPU "
                            "memory (through pinned host memory between two GPUs)",
                            kOptions)
