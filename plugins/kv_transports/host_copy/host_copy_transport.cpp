// KV transport that moves blocks between engines through host memory: between the engines of one
// process with start(), and between engine processes on one host over peer links (abi.h, ABI 1.2;
// peer_link.h: two rings in a shared-memory object, pinned when the KV is on a GPU).
//
// start() has two modes, chosen per transfer by the memory it is given:
// - real bytes: the blocks are copied by a worker thread, so transfers overlap with the engines'
//   steps; the duration reported is the measured copy time. Host to host with memcpy; when either
//   side is GPU memory (builds with CUDA only, device_copy.h) with cudaMemcpyAsync on dedicated
//   streams, through a pinned host buffer between two GPUs;
// - simulated (both sides NONE, as with the sim model): nothing is copied and the duration comes
//   from a bandwidth + latency model of the link the deployment names (presets below), which the
//   simulator adds to the virtual clock. It is the transfer's time alone on the link: the
//   simulator makes the transfers on one engine's link take turns (core::LinkSchedule). One side
//   NONE and the other real is refused: there would be nothing to copy from or to.
// Threading: every entry point may be called from any thread; one mutex guards the job, link and
// posted-transfer tables and is never held while bytes are copied (the links copy on threads of
// their own).
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <headway/plugin.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "peer_link.h"
#include "shared_link_memory.h"

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
    headway::sdk::int_option("peer_link_buffer_mb", 16, 1, 4096,
                             "Peer links between processes: MiB of shared memory per direction "
                             "of a link (pinned when the KV is on a GPU); a transfer larger than "
                             "this streams through it."),
    headway::sdk::double_option("peer_link_timeout_s", 30.0, 0.01, 3600.0,
                                "Peer links: seconds after which a link the other side has not "
                                "joined fails, and a transfer that waited this long for the "
                                "other side to move a byte."),
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

using headway::kv_transports::host_copy::PeerLink;
using headway::kv_transports::host_copy::PostedTransfer;
using headway::kv_transports::host_copy::SharedLinkMemory;

// Rendezvous ids this instance made and nobody here joined yet: their names are removed at
// destruction (or when more than this many wait), so an id never joined leaves nothing behind.
constexpr size_t kMaxUnjoinedIds = 64;

class HostCopyTransport final : public headway::sdk::KvTransport, public headway::sdk::KvPeerLinks {
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
    link_ring_bytes_ = static_cast<uint64_t>(options.get_int("peer_link_buffer_mb")) << 20;
    link_timeout_s_ = options.get_double("peer_link_timeout_s");
  }

  ~HostCopyTransport() override {
    std::unordered_map<uint64_t, std::unique_ptr<PeerLink>> links;
    {
      std::lock_guard lock(mutex_);
      links.swap(links_);
      for (const std::string& name : unjoined_ids_) SharedLinkMemory::remove_name(name);
    }
    links.clear();  // joins each link's threads
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  uint64_t start(const hw_kv_transfer& t) override {
    const bool simulated = t.source.kind == HW_MEMORY_NONE && t.destination.kind == HW_MEMORY_NONE;
    if (!simulated && (t.source.kind == HW_MEMORY_NONE || t.destination.kind == HW_MEMORY_NONE)) {
      // Modelling it would answer DONE with the destination's blocks untouched, which its engine
      // then reads as the request's KV: garbage, silently.
      throw Error(HW_INVALID_ARGUMENT,
                  std::string("host_copy: the ") +
                      (t.source.kind == HW_MEMORY_NONE ? "source" : "destination") +
                      " region is simulated (HW_MEMORY_NONE: no bytes behind it) and the other "
                      "is not: there is nothing to copy from or to");
    }
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
      const auto posted = posted_.find(handle);
      if (posted == posted_.end()) {
        throw Error(HW_NOT_FOUND, "host_copy: unknown transfer handle " + std::to_string(handle));
      }
      const int32_t state = posted->second->state.load(std::memory_order_acquire);
      if (state == HW_TRANSFER_PENDING) return {HW_TRANSFER_PENDING, 0.0};
      const headway::sdk::TransferProgress progress{static_cast<hw_transfer_state>(state),
                                                    posted->second->seconds};
      posted_.erase(posted);  // reported once, then forgotten
      return progress;
    }
    headway::sdk::TransferProgress progress{it->second.state, it->second.seconds};
    if (progress.state != HW_TRANSFER_PENDING) jobs_.erase(it);  // reported once, then forgotten
    return progress;
  }

  // A new shared-memory object; its name is the id.
  std::vector<uint8_t> peer_rendezvous() override {
    // Before this instance makes its first: the objects a crashed process made and nobody joined
    // (host memory nobody would free otherwise).
    std::call_once(orphans_swept_, [this] {
      if (const size_t removed = SharedLinkMemory::remove_orphans(); removed > 0) {
        host_.log(HW_LOG_INFO, "host_copy: removed " + std::to_string(removed) +
                                   " link object(s) of exited processes from /dev/shm");
      }
    });
    const std::unique_ptr<SharedLinkMemory> memory = SharedLinkMemory::create(link_ring_bytes_);
    const std::string& name = memory->name();
    std::lock_guard lock(mutex_);
    unjoined_ids_.push_back(name);
    if (unjoined_ids_.size() > kMaxUnjoinedIds) {
      SharedLinkMemory::remove_name(unjoined_ids_.front());
      unjoined_ids_.pop_front();
    }
    return std::vector<uint8_t>(name.begin(), name.end());
  }

  uint64_t peer_join(const std::vector<uint8_t>& id, int32_t rank, int32_t memory_kind,
                     int32_t device_id) override {
    if (rank != 0 && rank != 1) {
      throw Error(HW_INVALID_ARGUMENT,
                  "host_copy: peer_join: rank " + std::to_string(rank) + " is not 0 or 1");
    }
    if (memory_kind != HW_MEMORY_HOST && memory_kind != HW_MEMORY_DEVICE) {
      throw Error(HW_INVALID_ARGUMENT, "host_copy: peer_join: memory kind " +
                                           std::to_string(memory_kind) +
                                           " is neither host (0) nor device (1) memory");
    }
    if (memory_kind == HW_MEMORY_DEVICE && device_id < 0) {
      throw Error(HW_INVALID_ARGUMENT, "host_copy: peer_join: device memory without a device id (" +
                                           std::to_string(device_id) + ")");
    }
    const std::string name(id.begin(), id.end());
    std::unique_ptr<SharedLinkMemory> memory = SharedLinkMemory::open(name);
    uint64_t handle = 0;
    {
      std::lock_guard lock(mutex_);
      handle = next_handle_++;
    }
    auto link = std::make_unique<PeerLink>(std::move(memory), rank, memory_kind, device_id,
                                           link_timeout_s_, host_, handle);
    std::lock_guard lock(mutex_);
    std::erase(unjoined_ids_, name);
    links_.emplace(handle, std::move(link));
    return handle;
  }

  hw_transfer_state peer_state(uint64_t link) override {
    std::lock_guard lock(mutex_);
    return find_link(link).state();
  }

  uint64_t peer_post(uint64_t link, hw_peer_direction direction, const hw_memory_desc& memory,
                     const uint32_t* blocks, uint32_t block_count) override {
    if (direction != HW_PEER_SEND && direction != HW_PEER_RECEIVE) {
      throw Error(HW_INVALID_ARGUMENT, "host_copy: peer_post: direction " +
                                           std::to_string(direction) +
                                           " is neither HW_PEER_SEND nor HW_PEER_RECEIVE");
    }
    if (block_count > 0 && blocks == nullptr) {
      throw Error(HW_INVALID_ARGUMENT, "host_copy: peer_post: blocks is null");
    }
    auto transfer = std::make_shared<PostedTransfer>();
    transfer->direction = direction;
    transfer->memory = memory;
    transfer->blocks.assign(blocks, blocks + block_count);
    std::lock_guard lock(mutex_);
    find_link(link).post(transfer);
    const uint64_t handle = next_handle_++;
    posted_.emplace(handle, std::move(transfer));
    return handle;
  }

  void peer_close(uint64_t link) noexcept override {
    std::unique_ptr<PeerLink> closing;
    {
      std::lock_guard lock(mutex_);
      const auto it = links_.find(link);
      if (it == links_.end()) return;
      closing = std::move(it->second);
      links_.erase(it);
    }
    closing.reset();  // outside the lock: joins the link's threads
  }

 private:
  struct Job {
    hw_kv_transfer transfer{};
    hw_transfer_state state = HW_TRANSFER_PENDING;
    double seconds = 0.0;
  };

  PeerLink& find_link(uint64_t link) {
    const auto it = links_.find(link);
    if (it == links_.end()) {
      throw Error(HW_NOT_FOUND,
                  "host_copy: no peer link " + std::to_string(link) + " (never joined, or closed)");
    }
    return *it->second;
  }

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

  // Why block `block` (entry `entry` of the transfer's lists) of `side` cannot be copied: which
  // request, which block, and what the region holds, so that an operator can tell a plugin's bad
  // block list from a region described short (helper-208: the message named neither).
  static std::string outside_region(const hw_kv_transfer& t, const char* side,
                                    const hw_memory_desc& region, uint32_t block, uint32_t entry) {
    const uint64_t blocks = region.bytes < region.block_bytes || region.block_stride == 0
                                ? 0
                                : (region.bytes - region.block_bytes) / region.block_stride + 1;
    return "request " + std::to_string(t.request_id) + ": " + side + " block " +
           std::to_string(block) + " (entry " + std::to_string(entry) + " of " +
           std::to_string(t.block_count) + ") lies outside its KV region of " +
           std::to_string(blocks) + " blocks (" + std::to_string(region.bytes) + " bytes, " +
           std::to_string(region.block_bytes) + "-byte blocks " +
           std::to_string(region.block_stride) + " bytes apart)";
  }

  // Every block lies inside its region (checked before any byte moves); then the copy. Returns
  // what failed, or an empty string. Worker thread only.
  std::string copy(const hw_kv_transfer& t) {
    for (uint32_t i = 0; i < t.block_count; ++i) {
      if (!headway::sdk::block_in_region(t.source, t.source_blocks[i])) {
        return outside_region(t, "source", t.source, t.source_blocks[i], i);
      }
      if (!headway::sdk::block_in_region(t.destination, t.destination_blocks[i])) {
        return outside_region(t, "destination", t.destination, t.destination_blocks[i], i);
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
                  src + t.source_blocks[i] * t.source.block_stride, t.source.block_bytes);
    }
    return {};
  }

  const headway::sdk::Host host_;
#if HEADWAY_HOST_COPY_CUDA
  headway::kv_transports::host_copy::DeviceCopier device_copier_;  // the worker thread's
#endif
  double bytes_per_s_ = 0.0;
  double latency_s_ = 0.0;
  uint64_t link_ring_bytes_ = 0;
  double link_timeout_s_ = 0.0;
  std::once_flag orphans_swept_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::unordered_map<uint64_t, Job> jobs_;
  std::deque<uint64_t> queue_;
  // Peer links and the transfers posted on them; handles share next_handle_ with start()'s jobs.
  std::unordered_map<uint64_t, std::unique_ptr<PeerLink>> links_;
  std::unordered_map<uint64_t, std::shared_ptr<PostedTransfer>> posted_;
  std::deque<std::string> unjoined_ids_;
  uint64_t next_handle_ = 1;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(HostCopyTransport, "org.headway.kv_transport.host_copy", "host_copy",
                            "0.3.0",
                            "Moves KV blocks between engines through host memory: in one process "
                            "(GPU to GPU through a pinned buffer), and between processes on one "
                            "host over peer links of shared (pinned) memory",
                            kOptions)
