#include "tensor_parallel_group.h"

#include <cuda_runtime.h>

#include <headway/sdk/status.hpp>
#include <thread>

namespace headway::models::cuda {
namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  throw sdk::Error(HW_INTERNAL, std::string("cuda model: ") + what + ": " + ncclGetErrorString(r));
}

}  // namespace

TensorParallelGroup::TensorParallelGroup(const std::vector<std::unique_ptr<ModelShard>>& shards) {
  std::vector<int> devices;
  for (const auto& s : shards) devices.push_back(s->device());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  check_nccl(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devices.data()),
             "ncclCommInitAll");
  comms_ = std::move(comms);
}

TensorParallelGroup::~TensorParallelGroup() {
  for (ncclComm_t c : comms_) {
    if (c == nullptr) continue;
    ncclCommDestroy(c);  // working ones only: fail() aborted and cleared the others
  }
}

void TensorParallelGroup::all_reduce(const std::vector<std::unique_ptr<ModelShard>>& shards,
                                     size_t tokens, size_t hidden) {
  throw_if_broken();
  const size_t count = tokens * hidden;
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (size_t r = 0; r < shards.size(); ++r) {
    ModelShard& s = *shards[r];
    const ncclResult_t res = ncclAllReduce(s.partial(), s.partial(), count, ncclBfloat16, ncclSum,
                                           comms_[r], s.stream());
    if (res != ncclSuccess) {
      // NCCL launches nothing of a group that had an error: ending it leaves no rank waiting.
      ncclGroupEnd();
      check_nccl(res, "ncclAllReduce");
    }
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd (all-reduce)");
}

void TensorParallelGroup::warm_up(const std::vector<std::unique_ptr<ModelShard>>& shards,
                                  size_t max_tokens, size_t hidden) {
  all_reduce(shards, 1, hidden);
  if (max_tokens > 1) all_reduce(shards, max_tokens, hidden);
  wait(shards);
}

void TensorParallelGroup::wait(const std::vector<std::unique_ptr<ModelShard>>& shards) {
  throw_if_broken();
  // Every stream is queried each round (a finished one answers at once): a GPU that faulted shows
  // its error there while the others' all-reduces wait for it. No allocation: a step's wait.
  for (;;) {
    bool all_done = true;
    for (size_t r = 0; r < shards.size(); ++r) {
      const int device = shards[r]->device();
      const cudaError_t set = cudaSetDevice(device);
      const cudaError_t q = set != cudaSuccess ? set : cudaStreamQuery(shards[r]->stream());
      if (q == cudaSuccess) continue;
      if (q != cudaErrorNotReady) {
        fail("GPU " + std::to_string(device) + " failed in a step (" + cudaGetErrorName(q) + ": " +
             cudaGetErrorString(q) + ")");
      }
      all_done = false;
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comms_[r], &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        fail("NCCL on GPU " + std::to_string(device) + " failed in a step (" +
             ncclGetErrorString(async) + ")");
      }
    }
    if (all_done) return;
    // A step takes milliseconds; yielding keeps the wait's latency at a scheduler quantum at most.
    std::this_thread::yield();
  }
}

void TensorParallelGroup::throw_if_broken() const {
  // Aborted communicators ended their kernels: the streams drain by themselves.
  if (broken_.empty()) return;
  throw sdk::Error(HW_UNAVAILABLE, "cuda model: tensor parallelism is broken since " + broken_ +
                                       "; load the model again");
}

void TensorParallelGroup::fail(const std::string& why) {
  broken_ = why;
  // Ends the NCCL kernels still waiting for the failed rank, so that the other streams drain.
  for (ncclComm_t& c : comms_) {
    if (c != nullptr) ncclCommAbort(c);
    c = nullptr;  // freed by the abort
  }
  throw sdk::Error(HW_INTERNAL, "cuda model: " + why +
                                    "; the tensor-parallel group is aborted, load the model again");
}

}  // namespace headway::models::cuda
