// KV transport that moves blocks between GPUs of one process (engines as threads of one process,
// DESIGN.md's default shape) with NCCL point-to-point: one ncclGroupStart/End per transfer holding
// an ncclSend on the source GPU and an ncclRecv on the destination GPU for every block, on the
// transport's own stream per GPU, so the copy overlaps the engines' steps. Source and destination
// on the same GPU use cudaMemcpyAsync instead (NCCL needs two ranks on two devices).
//
// start() enqueues and returns; poll() asks the destination's completion event (non-blocking) and
// reports the duration measured between CUDA events. A transfer still pending after timeout_s is
// reported FAILED (its communicator is aborted, since its kernels may never finish); a NCCL
// asynchronous error fails every transfer of that communicator. Invalid descriptors (host memory,
// block sizes that differ, block ids beyond a region) are HW_INVALID_ARGUMENT at start().
//
// Ownership: owns its communicators (one per ordered pair of GPUs, created on first use), streams
// and events; block lists are borrowed until poll() reports DONE or FAILED (the ABI's rule).
// Threading: start() and poll() may be called from any thread; one mutex serialises them, which
// also keeps NCCL group calls on one thread at a time.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <headway/plugin.hpp>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace {

using headway::sdk::Error;

constexpr hw_option_spec kOptions[] = {
    headway::sdk::double_option("timeout_s", 30.0, 0.001, 86400.0,
                                "Seconds after which a transfer still in flight is failed."),
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

// A pair of ranks (0 = source GPU, 1 = destination GPU) and a stream on each.
struct Link {
  int devices[2] = {-1, -1};
  ncclComm_t comms[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {nullptr, nullptr};
  bool broken = false;
};

struct Job {
  Link* link = nullptr;
  int device = -1;  // where the events live (the destination)
  cudaEvent_t begin = nullptr;
  cudaEvent_t end = nullptr;
  std::chrono::steady_clock::time_point started;
};

class NcclTransport final : public headway::sdk::KvTransport {
 public:
  NcclTransport(const headway::sdk::Host& host, const headway::sdk::Options& options)
      : host_(host), timeout_s_(options.get_double("timeout_s")) {}

  ~NcclTransport() override {
    std::lock_guard lock(mutex_);
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
    if (link.broken) {
      throw Error(HW_UNAVAILABLE, "nccl transport: the link from GPU " +
                                      std::to_string(t.source.device_id) + " to GPU " +
                                      std::to_string(t.destination.device_id) +
                                      " failed earlier (timeout or NCCL error)");
    }
    Job job;
    job.link = &link;
    job.device = t.destination.device_id;
    const bool same = t.source.device_id == t.destination.device_id;
    cudaStream_t dst_stream = same ? link.streams[0] : link.streams[1];
    check_cuda(cudaSetDevice(job.device), "cudaSetDevice");
    check_cuda(cudaEventCreate(&job.begin), "cudaEventCreate");
    check_cuda(cudaEventCreate(&job.end), "cudaEventCreate");
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
        const ncclResult_t end = ncclGroupEnd();
        check_nccl(r, "ncclSend/ncclRecv");
        check_nccl(end, "ncclGroupEnd");
      }
      check_cuda(cudaSetDevice(job.device), "cudaSetDevice");
      check_cuda(cudaEventRecord(job.end, dst_stream), "cudaEventRecord");
    } catch (...) {
      release(job);
      throw;
    }
    job.started = std::chrono::steady_clock::now();
    const uint64_t handle = next_handle_++;
    jobs_.emplace(handle, job);
    return handle;
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    std::lock_guard lock(mutex_);
    auto it = jobs_.find(handle);
    if (it == jobs_.end()) {
      throw Error(HW_NOT_FOUND, "nccl transport: no transfer with handle " +
                                    std::to_string(handle) +
                                    " (already reported, or never started)");
    }
    Job& job = it->second;
    check_cuda(cudaSetDevice(job.device), "cudaSetDevice");
    const cudaError_t q = cudaEventQuery(job.end);
    if (q == cudaSuccess) {
      float ms = 0.0f;
      check_cuda(cudaEventElapsedTime(&ms, job.begin, job.end), "cudaEventElapsedTime");
      release(job);
      jobs_.erase(it);
      return {HW_TRANSFER_DONE, ms / 1e3};
    }
    if (q != cudaErrorNotReady) {
      fail(job, std::string("cudaEventQuery: ") + cudaGetErrorString(q));
      jobs_.erase(it);
      return {HW_TRANSFER_FAILED, 0.0};
    }
    for (ncclComm_t c : job.link->comms) {
      ncclResult_t async = ncclSuccess;
      if (c != nullptr && ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess) {
        fail(job, std::string("NCCL asynchronous error: ") + ncclGetErrorString(async));
        jobs_.erase(it);
        return {HW_TRANSFER_FAILED, 0.0};
      }
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - job.started).count();
    if (waited > timeout_s_) {
      fail(job, "timed out after " + std::to_string(waited) + " s");
      jobs_.erase(it);
      return {HW_TRANSFER_FAILED, 0.0};
    }
    return {HW_TRANSFER_PENDING, 0.0};
  }

 private:
  static void validate(const hw_kv_transfer& t) {
    const auto side = [&](const hw_memory_desc& m, const uint32_t* blocks, const char* name) {
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
      if (t.block_count > 0 && blocks == nullptr) {
        throw Error(HW_INVALID_ARGUMENT,
                    std::string("nccl transport: ") + name + " block list is NULL");
      }
      for (uint32_t i = 0; i < t.block_count; ++i) {
        if (uint64_t{blocks[i]} * m.block_stride + m.block_bytes > m.bytes) {
          throw Error(HW_INVALID_ARGUMENT, std::string("nccl transport: ") + name + " block " +
                                               std::to_string(blocks[i]) + " (entry " +
                                               std::to_string(i) + ") lies beyond its region of " +
                                               std::to_string(m.bytes) + " bytes");
        }
      }
    };
    side(t.source, t.source_blocks, "source");
    side(t.destination, t.destination_blocks, "destination");
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
      if (ranks == 2) {
        check_nccl(
            ncclCommInitAll(link.comms, 2, link.devices),
            "ncclCommInitAll(GPU " + std::to_string(src) + ", GPU " + std::to_string(dst) + ")");
      }
    } catch (...) {
      for (int r = 0; r < 2; ++r) {
        if (link.streams[r] != nullptr) cudaStreamDestroy(link.streams[r]);
      }
      links_.erase(it);
      throw;
    }
    return link;
  }

  void fail(Job& job, const std::string& why) {
    host_.log(HW_LOG_ERROR, "nccl transport: transfer failed: " + why);
    job.link->broken = true;
    for (ncclComm_t c : job.link->comms) {
      if (c != nullptr) ncclCommAbort(c);
    }
    job.link->comms[0] = job.link->comms[1] = nullptr;
    release(job);
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
  std::unordered_map<uint64_t, Job> jobs_;
  uint64_t next_handle_ = 1;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(NcclTransport, "org.headway.kv_transport.nccl", "nccl", "0.1.0",
                            "KV blocks between GPUs of one process over NCCL send/recv", kOptions)
