// KV blocks staged in POSIX shared memory between two engine processes on one host
// (disaggregation across processes): the prefill process writes a request's blocks back to back
// into a new object, the decode process copies them into the blocks it reserved and unlinks it.
//
// Only host memory can be staged (a model whose KV lives on a GPU needs a device transport).
// Threading: plain functions; each stage is written by one thread and read by one.
#pragma once

#include <headway/abi.h>
#include <headway/serving/request_stream.h>

#include <cstdint>
#include <span>
#include <string>

namespace headway::serving {

// Writes `blocks` of `memory` to a new shared-memory object called `name` ("/headway-kv-...").
// Throws core::Error naming the object when it cannot (not host memory, no space in /dev/shm).
KvStage write_kv_stage(const std::string& name, const hw_memory_desc& memory,
                       std::span<const uint32_t> blocks, uint32_t computed_tokens,
                       uint32_t block_size);

// Why `stage` cannot be read into `memory` (another block layout, host memory needed, the object
// gone or shorter than it claims); empty when it can.
std::string kv_stage_problem(const KvStage& stage, const hw_memory_desc& memory,
                             uint32_t block_size);

// Copies the stage's blocks into `blocks` of `memory` (which kv_stage_problem() accepted).
// Returns an empty string, or why the copy failed.
std::string read_kv_stage(const KvStage& stage, const hw_memory_desc& memory,
                          std::span<const uint32_t> blocks);

// Removes the object (after reading it, or when nobody will).
void discard_kv_stage(const std::string& name);

}  // namespace headway::serving
