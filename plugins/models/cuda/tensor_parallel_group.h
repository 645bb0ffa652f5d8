// The NCCL side of tensor parallelism in one process: one communicator per GPU (ncclCommInitAll),
// the all-reduce of the shards' layer outputs, and the wait for a step's end that does not hang
// when one GPU fails.
//
// Why the wait polls: a GPU that faults mid-step (an illegal address, an ECC error) never joins
// the next all-reduce, and the other ranks' NCCL kernels wait for it for ever; a
// cudaStreamSynchronize on any of them would never return. wait() queries every stream and every
// communicator's asynchronous error, and at the first failure aborts the communicators (which ends
// the waiting kernels) and throws; the group is broken from then on (a later step is refused, the
// model must be loaded again). A GPU that hangs without reporting an error keeps the wait going:
// serve's /health names an engine in one step for 120 s (docs/serving.md).
//
// Ownership: owns the communicators; destroys them (aborts them once broken) before the shards
// whose streams they ran on go. Threading: one thread at a time (the engine's).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "model_shard.h"

namespace headway::models::cuda {

class TensorParallelGroup {
 public:
  // Communicators over the shards' devices, in rank order. Throws sdk::Error naming the NCCL call.
  explicit TensorParallelGroup(const std::vector<std::unique_ptr<ModelShard>>& shards);
  ~TensorParallelGroup();
  TensorParallelGroup(const TensorParallelGroup&) = delete;
  TensorParallelGroup& operator=(const TensorParallelGroup&) = delete;

  // Sums every shard's partial() of `tokens` rows over the ranks, in place, on each shard's stream.
  void all_reduce(const std::vector<std::unique_ptr<ModelShard>>& shards, size_t tokens,
                  size_t hidden);
  // Runs all-reduces of 1 and `max_tokens` rows and waits: NCCL connects and allocates its buffers
  // for an algorithm at its first collective, which must come before the KV cache takes the
  // memory left.
  void warm_up(const std::vector<std::unique_ptr<ModelShard>>& shards, size_t max_tokens,
               size_t hidden);
  // Waits until every shard's stream is done (see above). Throws sdk::Error (HW_INTERNAL) naming
  // the GPU and the error on a failure, after aborting the communicators.
  void wait(const std::vector<std::unique_ptr<ModelShard>>& shards);
  // Why the group broke; empty while it works.
  const std::string& broken() const { return broken_; }

 private:
  [[noreturn]] void fail(const std::string& why);
  // HW_UNAVAILABLE once the group broke: a later step is refused.
  void throw_if_broken() const;

  std::vector<ncclComm_t> comms_;
  std::string broken_;
};

}  // namespace headway::models::cuda
