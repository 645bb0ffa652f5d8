// KV transport that moves blocks between GPUs with NCCL point-to-point, in one process or between
// two processes.
//
// In one process (engines as threads of one process, DESIGN.md's default shape), start(): one
// ncclGroupStart/End per transfer holding an ncclSend on the source GPU and an ncclRecv on the
// destination GPU for every block, on the transport's own stream per GPU, so the copy overlaps the
// engines' steps. Source and destination on the same GPU use cudaMemcpyAsync instead (NCCL needs
// two ranks on two devices).
//
// Between processes (peer links, ABI 1.2; one GPU each): peer_rendezvous() makes an ncclUniqueId,
// the core hands it to the other process, and both peer_join() it with opposite ranks of a 2-rank
// communicator created non-blocking (ncclCommInitRankConfig with config.blocking = 0), so neither
// call waits for the other process; peer_state() reports the link up once NCCL says the
// communicator is. peer_post() puts one side of a transfer on a link: an ncclSend (or ncclRecv) of
// every block to the other rank, in one group on the link's stream. NCCL pairs a link's sends and
// receives in the order each side issues them; the transport issues a link's posts in the order
// they were posted, and the core keeps both sides' orders equal (a send and its receive have the
// same block count and block bytes). On a non-blocking communicator ncclGroupEnd may return
// ncclInProgress (NCCL still enqueues in the background; the first group on a link waits there for
// the other process to issue its match), and until ncclCommGetAsyncError says ncclSuccess nothing
// may use that communicator or its stream: meanwhile later posts on the link wait in a queue, and
// the transfer's end event is recorded once the state is ncclSuccess (poll(), peer_state() and
// peer_post() move a link's posts on; nothing here waits for the other process). peer_close()
// aborts a link that failed, is not up, or has transfers that have not completed (they report
// FAILED; it returns once the link's stream has drained); otherwise NCCL finalises the communicator
// in the background, which ends when the other process closes its side too: it is destroyed then,
// or aborted if that has not happened within timeout_s.
//
// start() and peer_post() enqueue and return; poll() asks the transfer's completion event
// (non-blocking) and reports the duration measured between CUDA events. A transfer's timeout_s
// counts from the first poll() that finds its begin event completed, i.e. from when its link's
// stream reached it: one queued behind others on its link is not timed while they run (the one in
// front is). A transfer still pending timeout_s after that is reported FAILED, as is a peer link
// not up within timeout_s of its join; a NCCL asynchronous error, or a CUDA error poll() meets once
// the transfer is enqueued, fails the transfer too (poll() never throws then: the host would free
// blocks a copy may still write). A failure breaks the transfer's link: every transfer on it that
// has not completed fails, its communicators are aborted (their kernels may never finish), and then
// its streams are waited for, before any of those transfers reports FAILED: a same-GPU copy, which
// nothing aborts, runs to its end first, so no block of a FAILED transfer is written after the host
// takes it back (a GPU that never drains them would hang the transport, as it hangs the engines).
// The next start() between the same two GPUs makes the link's communicators again. Invalid
// descriptors (host memory, block sizes that differ, block ids beyond a region) are
// HW_INVALID_ARGUMENT at start() or peer_post().
//
// Ownership: owns its communicators (one per ordered pair of GPUs, created on first use and again
// after the pair's link broke, and one per peer link, from its join until its close), streams and
// events; block lists are borrowed until poll() reports DONE or FAILED (the ABI's rule).
// Threading: every function may be called from any thread; one mutex serialises them (all but
// peer_rendezvous(), which touches no state), which also keeps NCCL group calls on one thread at a
// time and every other NCCL call away from a communicator while it is aborted.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <headway/plugin.hpp>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using headway::sdk::Error;
using Clock = std::chrono::steady_clock;

static_assert(sizeof(ncclUniqueId) <= HW_PEER_ID_MAX, "an ncclUniqueId must fit a rendezvous id");

constexpr hw_option_spec kOptions[] = {
    headway::sdk::double_option("timeout_s", 30.0, 0.001, 86400.0,
                                "Seconds a transfer may run, from when its link's stream reaches "
                                "it, before it is failed; also how long a peer link may take to "
                                "come up, or to close cleanly."),
};

void check_cuda(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) {
    throw Error(
        err == cudaErrorMemoryAllocation ? HW_RESOURCE_EXHAUSTED : HW_INTERNAL,
        "nccl transport: " + what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  }
}

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) {
    throw Error(HW_INTERNAL, "nccl transport: " + what + ": " + ncclGetErrorString(r));
  }
}

// A communicator's state: its asynchronous error (ncclInProgress while a non-blocking operation on
// it still runs), or what asking for it returned.
ncclResult_t comm_state(ncclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
  return r != ncclSuccess ? r : state;
}

// What transfers run on. A same-process link pairs two GPUs, rank 0 the source and rank 1 the
// destination, each with its communicator (none when both are one GPU) and stream. A peer link is
// this process's rank of a 2-rank communicator shared with another process: its GPU, communicator
// and stream in slot 0, slot 1 unused.
struct Link {
  int devices[2] = {-1, -1};
  ncclComm_t comms[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {nullptr, nullptr};
  bool broken = false;
  // Peer links only.
  bool peer = false;
  uint64_t id = 0;  // its handle
  int rank = -1;
  bool up = false;  // the communicator finished initialising
  Clock::time_point joined;
  std::deque<uint64_t> queued;  // posted transfers waiting for the communicator, in post order
  uint64_t issuing = 0;         // the transfer whose group returned ncclInProgress (0: none)
};

// This process's side of a transfer on a peer link, kept until NCCL has it.
struct Post {
  hw_peer_direction direction = HW_PEER_SEND;
  hw_memory_desc memory{};
  const uint32_t* blocks = nullptr;
  uint32_t count = 0;
};

enum class Stage {
  kQueued,   // posted on a peer link, waiting for its communicator
  kIssuing,  // its group returned ncclInProgress: NCCL enqueues it in the background
  kIssued,   // enqueued on the stream, end event recorded
};

struct Job {
  Link* link = nullptr;  // NULL once its peer link is closed
  int device = -1;       // where the events live (the destination, or the peer link's GPU)
  cudaEvent_t begin = nullptr;
  cudaEvent_t end = nullptr;
  // When poll() first found `begin` completed (the link's stream reached the transfer): its
  // timeout counts from there. Unset (timed false) before.
  bool timed = false;
  Clock::time_point started;
  Stage stage = Stage::kIssued;
  Post post;            // peer transfers only
  std::string failure;  // non-empty: its link broke or closed under it; FAILED at the next poll()
};

// A peer link's communicator that NCCL finalises in the background after a clean close.
struct Closing {
  ncclComm_t comm = nullptr;
  int device = -1;
  Clock::time_point deadline;  // aborted if not finalised by then
};

class NcclTransport final : public headway::sdk::KvTransport, public headway::sdk::KvPeerLinks {
 public:
  NcclTransport(const headway::sdk::Host& host, const headway::sdk::Options& options)
      : host_(host), timeout_s_(options.get_double("timeout_s")) {}

  ~NcclTransport() override {
    std::lock_guard lock(mutex_);
    for (auto& [handle, link] : peer_links_) close_peer(link);
    peer_links_.clear();
    reap(true);  // waits on no other process: what NCCL still finalises is aborted
    for (auto& [handle, job] : jobs_) release(job);
    for (auto& [key, link] : links_) {
      for (int r = 0; r < 2; ++r) {
        if (link.devices[r] < 0) continue;
        cudaSetDevice(link.devices[r]);
        if (link.streams[r] != nullptr) {
          if (!link.broken) cudaStreamSynchronize(link.streams[r]);
          cudaStreamDestroy(link.streams[r]);
        }
        if (link.comms[r] != nullptr) {
          if (link.broken) {
            ncclCommAbort(link.comms[r]);
          } else {
            ncclCommDestroy(link.comms[r]);
          }
        }
      }
    }
  }

  uint64_t start(const hw_kv_transfer& t) override {
    validate(t);
    std::lock_guard lock(mutex_);
    Link& link = link_for(t.source.device_id, t.destination.device_id);
    if (link.broken) reopen(link);
    Job job;
    job.link = &link;
    job.device = t.destination.device_id;
    const bool same = t.source.device_id == t.destination.device_id;
    cudaStream_t dst_stream = same ? link.streams[0] : link.streams[1];
    create_events(job);
    bool enqueued = false;  // NCCL's kernels are on the link's streams
    try {
      check_cuda(cudaEventRecord(job.begin, dst_stream), "cudaEventRecord");
      const auto* src = static_cast<const std::byte*>(t.source.base);
      auto* dst = static_cast<std::byte*>(t.destination.base);
      const uint64_t bytes = t.source.block_bytes;
      if (same) {
        for (uint32_t i = 0; i < t.block_count; ++i) {
          check_cuda(cudaMemcpyAsync(dst + t.destination_blocks[i] * t.destination.block_stride,
                                     src + t.source_blocks[i] * t.source.block_stride, bytes,
                                     cudaMemcpyDeviceToDevice, dst_stream),
                     "cudaMemcpyAsync (block " + std::to_string(i) + ")");
          enqueued = true;
        }
      } else {
        // Every send and receive of the transfer in one group: NCCL pairs them in order.
        check_nccl(ncclGroupStart(), "ncclGroupStart");
        ncclResult_t r = ncclSuccess;
        for (uint32_t i = 0; i < t.block_count && r == ncclSuccess; ++i) {
          r = ncclSend(src + t.source_blocks[i] * t.source.block_stride, bytes, ncclUint8, 1,
                       link.comms[0], link.streams[0]);
          if (r == ncclSuccess) {
            r = ncclRecv(dst + t.destination_blocks[i] * t.destination.block_stride, bytes,
                         ncclUint8, 0, link.comms[1], link.streams[1]);
          }
        }
        // Every call accepted: ncclGroupEnd may launch some of them even when it fails. (A
        // refused call makes it launch none.)
        enqueued = r == ncclSuccess;
        const ncclResult_t end = ncclGroupEnd();
        check_nccl(r, "ncclSend/ncclRecv");
        check_nccl(end, "ncclGroupEnd");
      }
      check_cuda(cudaSetDevice(job.device), "cudaSetDevice");
      check_cuda(cudaEventRecord(job.end, dst_stream), "cudaEventRecord");
    } catch (const std::exception& e) {
      release(job);
      // Refused, yet the copies or receives enqueued may still write the destination's blocks,
      // which the engine takes back: abort them and wait for the link's streams (break_link).
      // The next start() makes the link again, as after a timeout.
      if (enqueued) break_link(link, std::string("after the transfer was enqueued: ") + e.what());
      throw;
    }
    const uint64_t handle = next_handle_++;
    jobs_.emplace(handle, std::move(job));
    return handle;
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    std::lock_guard lock(mutex_);
    reap();
    auto it = jobs_.find(handle);
    if (it == jobs_.end()) {
      throw Error(HW_NOT_FOUND, "nccl transport: no transfer with handle " +
                                    std::to_string(handle) +
                                    " (already reported, or never started)");
    }
    Job& job = it->second;
    if (job.link != nullptr && job.link->peer) advance(*job.link);
    if (!job.failure.empty()) {  // its link broke or closed under it (logged then, if at all)
      release(job);
      jobs_.erase(it);
      return {HW_TRANSFER_FAILED, 0.0};
    }
    // From here on the transfer may be running: an error fails it (break_link waits for its link's
    // streams), never throws, since the host frees a transfer's blocks when poll() fails too.
    if (job.stage == Stage::kQueued) return {HW_TRANSFER_PENDING, 0.0};  // no event recorded yet
    const cudaError_t device = cudaSetDevice(job.device);
    if (device != cudaSuccess) {
      return failed(it, std::string("cudaSetDevice: ") + cudaGetErrorString(device));
    }
    if (job.stage == Stage::kIssued) {
      const cudaError_t q = cudaEventQuery(job.end);
      if (q == cudaSuccess) {
        float ms = 0.0f;
        const cudaError_t e = cudaEventElapsedTime(&ms, job.begin, job.end);
        if (e != cudaSuccess) {  // the bytes are there; only the duration is unknown
          host_.log(HW_LOG_WARN, std::string("nccl transport: cudaEventElapsedTime: ") +
                                     cudaGetErrorString(e) + "; the transfer reports 0 s");
          ms = 0.0f;
        }
        release(job);
        jobs_.erase(it);
        return {HW_TRANSFER_DONE, ms / 1e3};
      }
      if (q != cudaErrorNotReady) {
        return failed(it, std::string("cudaEventQuery: ") + cudaGetErrorString(q));
      }
    }
    if (!job.timed) {
      // Recorded before the transfer's work on its link's stream: completed once the stream
      // reached it, not while it waits behind the transfers in front of it.
      const cudaError_t q = cudaEventQuery(job.begin);
      if (q == cudaSuccess) {
        job.timed = true;
        job.started = Clock::now();
      } else if (q != cudaErrorNotReady) {
        return failed(it, std::string("cudaEventQuery (begin): ") + cudaGetErrorString(q));
      }
    }
    if (job.link != nullptr) {
      for (ncclComm_t c : job.link->comms) {
        // ncclInProgress is no error: a peer link's group that NCCL still enqueues.
        ncclResult_t async = ncclSuccess;
        if (c != nullptr && ncclCommGetAsyncError(c, &async) == ncclSuccess &&
            async != ncclSuccess && async != ncclInProgress) {
          return failed(it, std::string("NCCL asynchronous error: ") + ncclGetErrorString(async));
        }
      }
    }
    if (job.timed) {
      const double waited = std::chrono::duration<double>(Clock::now() - job.started).count();
      if (waited > timeout_s_) {
        return failed(it, "timed out after " + std::to_string(waited) + " s on its link's stream");
      }
    }
    return {HW_TRANSFER_PENDING, 0.0};
  }

  std::vector<uint8_t> peer_rendezvous() override {
    ncclUniqueId id;
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    return std::vector<uint8_t>(bytes, bytes + sizeof(id));
  }

  uint64_t peer_join(const std::vector<uint8_t>& id, int32_t rank, int32_t memory_kind,
                     int32_t device_id) override {
    if (memory_kind != HW_MEMORY_DEVICE || device_id < 0) {
      throw Error(HW_INVALID_ARGUMENT,
                  "nccl transport: a peer link's memory is not on a GPU (kind " +
                      std::to_string(memory_kind) + ", device " + std::to_string(device_id) +
                      "); use host_copy for host memory");
    }
    if (id.size() != sizeof(ncclUniqueId)) {
      throw Error(HW_INVALID_ARGUMENT, "nccl transport: a rendezvous id is an ncclUniqueId of " +
                                           std::to_string(sizeof(ncclUniqueId)) + " bytes, not " +
                                           std::to_string(id.size()));
    }
    if (rank != 0 && rank != 1) {
      throw Error(HW_INVALID_ARGUMENT,
                  "nccl transport: a peer link's rank is 0 or 1, not " + std::to_string(rank));
    }
    ncclUniqueId unique;
    std::memcpy(&unique, id.data(), sizeof(unique));
    std::lock_guard lock(mutex_);
    reap();
    const uint64_t handle = next_handle_++;
    Link& link = peer_links_[handle];  // node-based: Link addresses stay valid
    link.peer = true;
    link.id = handle;
    link.rank = rank;
    link.devices[0] = device_id;
    try {
      check_cuda(cudaSetDevice(device_id), "cudaSetDevice(" + std::to_string(device_id) + ")");
      check_cuda(cudaStreamCreateWithFlags(&link.streams[0], cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags");
      // Non-blocking: returns ncclInProgress while the other rank has not joined; refresh() asks.
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      const ncclResult_t r = ncclCommInitRankConfig(&link.comms[0], 2, unique, rank, &config);
      if (r != ncclInProgress) {
        check_nccl(r, "ncclCommInitRankConfig(rank " + std::to_string(rank) + " of 2, GPU " +
                          std::to_string(device_id) + ")");
      }
    } catch (...) {
      if (link.comms[0] != nullptr) ncclCommAbort(link.comms[0]);
      if (link.streams[0] != nullptr) cudaStreamDestroy(link.streams[0]);
      peer_links_.erase(handle);
      throw;
    }
    link.joined = Clock::now();
    return handle;
  }

  hw_transfer_state peer_state(uint64_t link) override {
    std::lock_guard lock(mutex_);
    reap();
    return refresh(peer_link(link));
  }

  uint64_t peer_post(uint64_t link_handle, hw_peer_direction direction,
                     const hw_memory_desc& memory, const uint32_t* blocks,
                     uint32_t block_count) override {
    validate_side(memory, blocks, block_count, "posted");
    std::lock_guard lock(mutex_);
    reap();
    Link& link = peer_link(link_handle);
    if (refresh(link) != HW_TRANSFER_DONE) {
      throw Error(HW_UNAVAILABLE, "nccl transport: " + where(link) +
                                      "not up (still joining, or failed: close it and join "
                                      "another)");
    }
    if (memory.device_id != link.devices[0]) {
      throw Error(HW_INVALID_ARGUMENT, "nccl transport: " + where(link) +
                                           "the posted memory is on GPU " +
                                           std::to_string(memory.device_id));
    }
    Job job;
    job.link = &link;
    job.device = link.devices[0];
    job.stage = Stage::kQueued;
    job.post = Post{direction, memory, blocks, block_count};
    create_events(job);
    const uint64_t handle = next_handle_++;
    jobs_.emplace(handle, std::move(job));
    link.queued.push_back(handle);
    advance(link);
    auto it = jobs_.find(handle);
    if (!it->second.failure.empty()) {  // the link broke issuing it (or one before it)
      const std::string why = it->second.failure;
      release(it->second);
      jobs_.erase(it);
      throw Error(HW_UNAVAILABLE, "nccl transport: " + where(link) + why);
    }
    return handle;
  }

  void peer_close(uint64_t link) noexcept override {
    try {
      std::lock_guard lock(mutex_);
      auto it = peer_links_.find(link);
      if (it == peer_links_.end()) return;
      close_peer(it->second);
      peer_links_.erase(it);
      reap();
    } catch (...) {
      // Nothing to report to (only locking or allocating can throw here): closing is best effort.
    }
  }

 private:
  // One side of a transfer: GPU memory with a base, block bytes, a stride that fits them, and
  // every listed block inside the region.
  static void validate_side(const hw_memory_desc& m, const uint32_t* blocks, uint32_t count,
                            const char* name) {
    if (m.kind != HW_MEMORY_DEVICE || m.device_id < 0) {
      throw Error(HW_INVALID_ARGUMENT,
                  std::string("nccl transport: ") + name + " memory is not on a GPU (kind " +
                      std::to_string(m.kind) + ", device " + std::to_string(m.device_id) +
                      "); use host_copy for host memory");
    }
    if (m.base == nullptr || m.block_bytes == 0 || m.block_stride < m.block_bytes) {
      throw Error(HW_INVALID_ARGUMENT, std::string("nccl transport: ") + name +
                                           " descriptor has no base, no block bytes or a "
                                           "stride below the block size");
    }
    if (count > 0 && blocks == nullptr) {
      throw Error(HW_INVALID_ARGUMENT,
                  std::string("nccl transport: ") + name + " block list is NULL");
    }
    for (uint32_t i = 0; i < count; ++i) {
      if (!headway::sdk::block_in_region(m, blocks[i])) {
        throw Error(HW_INVALID_ARGUMENT, std::string("nccl transport: ") + name + " block " +
                                             std::to_string(blocks[i]) + " (entry " +
                                             std::to_string(i) + ") lies beyond its region of " +
                                             std::to_string(m.bytes) + " bytes");
      }
    }
  }

  static void validate(const hw_kv_transfer& t) {
    validate_side(t.source, t.source_blocks, t.block_count, "source");
    validate_side(t.destination, t.destination_blocks, t.block_count, "destination");
    if (t.source.block_bytes != t.destination.block_bytes) {
      throw Error(HW_INVALID_ARGUMENT, "nccl transport: block sizes differ (source " +
                                           std::to_string(t.source.block_bytes) +
                                           " bytes, destination " +
                                           std::to_string(t.destination.block_bytes) + ")");
    }
  }

  Link& link_for(int src, int dst) {
    auto [it, inserted] = links_.try_emplace({src, dst});
    Link& link = it->second;
    if (!inserted) return link;
    try {
      link.devices[0] = src;
      link.devices[1] = dst;
      const int ranks = src == dst ? 1 : 2;
      for (int r = 0; r < ranks; ++r) {
        check_cuda(cudaSetDevice(link.devices[r]),
                   "cudaSetDevice(" + std::to_string(link.devices[r]) + ")");
        check_cuda(cudaStreamCreateWithFlags(&link.streams[r], cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags");
      }
      if (ranks == 2) open_comms(link);
    } catch (...) {
      for (int r = 0; r < 2; ++r) {
        if (link.streams[r] != nullptr) cudaStreamDestroy(link.streams[r]);
      }
      links_.erase(it);
      throw;
    }
    return link;
  }

  // The communicators of a same-process link between two GPUs (none for one GPU).
  static void open_comms(Link& link) {
    if (link.devices[0] == link.devices[1]) return;
    check_nccl(ncclCommInitAll(link.comms, 2, link.devices),
               "ncclCommInitAll(GPU " + std::to_string(link.devices[0]) + ", GPU " +
                   std::to_string(link.devices[1]) + ")");
  }

  // Makes a broken same-process link usable again: break_link aborted its communicators and waited
  // for its streams, which stay; the transfers that failed on it keep reporting FAILED. Throws as
  // link_for does (the link then stays broken, and the next start() tries again).
  void reopen(Link& link) {
    host_.log(HW_LOG_INFO, "nccl transport: making the link from GPU " +
                               std::to_string(link.devices[0]) + " to GPU " +
                               std::to_string(link.devices[1]) + " again after its failure");
    open_comms(link);
    link.broken = false;
  }

  Link& peer_link(uint64_t handle) {
    auto it = peer_links_.find(handle);
    if (it == peer_links_.end()) {
      throw Error(HW_NOT_FOUND, "nccl transport: no peer link with handle " +
                                    std::to_string(handle) + " (closed, or never joined)");
    }
    return it->second;
  }

  // Prefix of a message about `link` ("" for a same-process link).
  static std::string where(const Link& link) {
    if (!link.peer) return "";
    return "peer link " + std::to_string(link.id) + " (rank " + std::to_string(link.rank) +
           ", GPU " + std::to_string(link.devices[0]) + "): ";
  }

  // Where a peer link stands, moving its posts on: PENDING while its communicator initialises
  // (FAILED past timeout_s since the join), DONE once up, FAILED once broken.
  hw_transfer_state refresh(Link& link) {
    if (!link.broken && !link.up) {
      const ncclResult_t state = comm_state(link.comms[0]);
      if (state == ncclSuccess) {
        link.up = true;
      } else if (state != ncclInProgress) {
        break_link(link, std::string("joining failed: ") + ncclGetErrorString(state));
      } else {
        const double waited = std::chrono::duration<double>(Clock::now() - link.joined).count();
        if (waited <= timeout_s_) return HW_TRANSFER_PENDING;
        break_link(link, "not up " + std::to_string(waited) + " s after joining");
      }
    }
    if (!link.broken) advance(link);
    return link.broken ? HW_TRANSFER_FAILED : HW_TRANSFER_DONE;
  }

  // Moves an up peer link's posts on. NCCL allows no call on a non-blocking communicator (nor any
  // CUDA work on its stream) until its state leaves ncclInProgress: then the end event of the
  // transfer NCCL was enqueuing is recorded, and queued transfers are issued until one returns
  // ncclInProgress again.
  void advance(Link& link) {
    while (!link.broken) {
      const ncclResult_t state = comm_state(link.comms[0]);
      if (state == ncclInProgress) return;
      if (state != ncclSuccess) {
        break_link(link, std::string("NCCL asynchronous error: ") + ncclGetErrorString(state));
        return;
      }
      if (link.issuing != 0) {
        auto it = jobs_.find(link.issuing);
        link.issuing = 0;
        if (it != jobs_.end()) record_end(link, it->second);
        continue;
      }
      if (link.queued.empty()) return;
      const uint64_t next = link.queued.front();
      link.queued.pop_front();
      auto it = jobs_.find(next);
      if (it != jobs_.end()) issue(link, next, it->second);
    }
  }

  // Hands a posted transfer to NCCL: its begin event, then one group of an ncclSend (or ncclRecv)
  // per block to the other rank. The link breaks if NCCL or CUDA refuse.
  void issue(Link& link, uint64_t handle, Job& job) {
    // Its timeout counts from when its begin event completes (poll()): waiting behind earlier
    // posts (or for the link's first connection) is not this transfer's fault.
    const Post& p = job.post;
    cudaError_t e = cudaSetDevice(link.devices[0]);
    if (e == cudaSuccess) e = cudaEventRecord(job.begin, link.streams[0]);
    if (e != cudaSuccess) {
      break_link(link, std::string("cudaEventRecord: ") + cudaGetErrorString(e));
      return;
    }
    const ncclResult_t start = ncclGroupStart();
    if (start != ncclSuccess) {
      break_link(link, std::string("ncclGroupStart: ") + ncclGetErrorString(start));
      return;
    }
    auto* base = static_cast<std::byte*>(p.memory.base);
    const int peer = 1 - link.rank;
    ncclResult_t r = ncclSuccess;
    for (uint32_t i = 0; i < p.count && r == ncclSuccess; ++i) {
      std::byte* block = base + p.blocks[i] * p.memory.block_stride;
      r = p.direction == HW_PEER_SEND ? ncclSend(block, p.memory.block_bytes, ncclUint8, peer,
                                                 link.comms[0], link.streams[0])
                                      : ncclRecv(block, p.memory.block_bytes, ncclUint8, peer,
                                                 link.comms[0], link.streams[0]);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess) {
      break_link(link, std::string("ncclSend/ncclRecv: ") + ncclGetErrorString(r));
    } else if (end == ncclInProgress) {
      job.stage = Stage::kIssuing;
      link.issuing = handle;
    } else if (end != ncclSuccess) {
      break_link(link, std::string("ncclGroupEnd: ") + ncclGetErrorString(end));
    } else {
      record_end(link, job);
    }
  }

  // Records a peer transfer's end event, once NCCL has enqueued all of it on the link's stream.
  void record_end(Link& link, Job& job) {
    cudaError_t e = cudaSetDevice(link.devices[0]);
    if (e == cudaSuccess) e = cudaEventRecord(job.end, link.streams[0]);
    if (e != cudaSuccess) {
      break_link(link, std::string("cudaEventRecord: ") + cudaGetErrorString(e));
      return;
    }
    job.stage = Stage::kIssued;
  }

  // Whether a transfer's work on the GPU is over.
  static bool completed(const Job& job) {
    if (job.stage != Stage::kIssued || job.end == nullptr) return false;
    cudaSetDevice(job.device);
    return cudaEventQuery(job.end) == cudaSuccess;
  }

  // Logs why `link` failed, fails every transfer on it that has not completed, aborts its
  // communicators (their kernels may never finish) and waits for its streams. Transfers are marked
  // before the abort: an aborted kernel may complete its event without having moved the data. The
  // wait is what lets them report FAILED: until the streams drain, an aborted kernel may still be
  // exiting and a same-GPU copy (nothing aborts a cudaMemcpyAsync) still writing the destination's
  // blocks, which the host frees or reuses once it sees FAILED.
  void break_link(Link& link, const std::string& why) {
    host_.log(HW_LOG_ERROR, "nccl transport: " + where(link) + why);
    for (auto& [handle, job] : jobs_) {
      if (job.link == &link && job.failure.empty() && !completed(job)) job.failure = why;
    }
    link.broken = true;
    for (ncclComm_t c : link.comms) {
      if (c != nullptr) ncclCommAbort(c);
    }
    link.comms[0] = link.comms[1] = nullptr;
    link.queued.clear();
    link.issuing = 0;
    drain(link);
  }

  // Waits for the work on `link`'s streams to end. An error (a context that broke) ends the wait
  // as well: nothing runs on the stream then.
  static void drain(const Link& link) {
    for (int r = 0; r < 2; ++r) {
      if (link.streams[r] == nullptr) continue;
      cudaSetDevice(link.devices[r]);
      cudaStreamSynchronize(link.streams[r]);
    }
  }

  // Fails the transfer at `it` (breaking its link, so it returns once the link's streams are
  // drained), erases it, and reports FAILED.
  headway::sdk::TransferProgress failed(std::unordered_map<uint64_t, Job>::iterator it,
                                        const std::string& why) {
    fail(it->second, why);
    jobs_.erase(it);
    return {HW_TRANSFER_FAILED, 0.0};
  }

  // Fails `job` (the caller erases it) and breaks its link.
  void fail(Job& job, const std::string& why) {
    if (job.link != nullptr) {
      break_link(*job.link, "transfer failed: " + why);
    } else {
      host_.log(HW_LOG_ERROR, "nccl transport: transfer failed: " + why);
    }
    release(job);
  }

  // Lets go of a peer link (the caller erases it): its transfers that have not completed fail and
  // none keeps a pointer to it. Its communicator is aborted when the link failed, is not up, or had
  // such transfers, and its stream is then waited for (peer_close() promises that the plugin
  // touches none of their memory once it returns); otherwise NCCL finalises it in the background
  // (reap() destroys it then).
  void close_peer(Link& link) {
    bool in_flight = false;
    for (auto& [handle, job] : jobs_) {
      if (job.link != &link) continue;
      if (job.failure.empty() && !completed(job)) {
        job.failure = "its peer link was closed";
        in_flight = true;
      }
      job.link = nullptr;
    }
    cudaSetDevice(link.devices[0]);
    if (link.comms[0] != nullptr) {
      bool finalising = false;
      if (link.up && !link.broken && !in_flight) {
        const ncclResult_t r = ncclCommFinalize(link.comms[0]);  // non-blocking on this comm
        finalising = r == ncclSuccess || r == ncclInProgress;
      }
      if (finalising) {
        closing_.push_back({link.comms[0], link.devices[0],
                            Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(timeout_s_))});
      } else {
        ncclCommAbort(link.comms[0]);
        if (in_flight) drain(link);
      }
      link.comms[0] = nullptr;
    }
    if (link.streams[0] != nullptr) cudaStreamDestroy(link.streams[0]);
    link.streams[0] = nullptr;
  }

  // Destroys the closed communicators NCCL finished finalising (ncclCommDestroy does not block
  // then) and aborts those that failed or are past their deadline; with `all`, aborts the rest too.
  void reap(bool all = false) {
    const Clock::time_point now = Clock::now();
    for (auto it = closing_.begin(); it != closing_.end();) {
      const ncclResult_t state = comm_state(it->comm);
      if (state == ncclInProgress && !all && now < it->deadline) {
        ++it;
        continue;
      }
      cudaSetDevice(it->device);
      if (state == ncclSuccess) {
        ncclCommDestroy(it->comm);
      } else {
        ncclCommAbort(it->comm);
      }
      it = closing_.erase(it);
    }
  }

  static void create_events(Job& job) {
    check_cuda(cudaSetDevice(job.device), "cudaSetDevice");
    try {
      check_cuda(cudaEventCreate(&job.begin), "cudaEventCreate");
      check_cuda(cudaEventCreate(&job.end), "cudaEventCreate");
    } catch (...) {
      release(job);
      throw;
    }
  }

  static void release(Job& job) {
    if (job.device >= 0) cudaSetDevice(job.device);
    if (job.begin != nullptr) cudaEventDestroy(job.begin);
    if (job.end != nullptr) cudaEventDestroy(job.end);
    job.begin = job.end = nullptr;
  }

  headway::sdk::Host host_;
  double timeout_s_;
  std::mutex mutex_;
  std::map<std::pair<int, int>, Link> links_;  // node-based: Link addresses stay valid
  std::map<uint64_t, Link> peer_links_;        // by handle; node-based too
  std::vector<Closing> closing_;
  std::unordered_map<uint64_t, Job> jobs_;
  uint64_t next_handle_ = 1;  // transfers and peer links alike
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(NcclTransport, "org.headway.kv_transport.nccl", "nccl", "0.1.0",
                            "KV blocks between GPUs over NCCL send/recv, in one process or between "
                            "processes",
                            kOptions)
