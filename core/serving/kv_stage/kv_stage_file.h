// KV blocks staged in POSIX shared memory between two engine processes (disaggregation across
// processes): the prefill process writes a request's blocks back to back into a new object; a
// decode process on the same host copies them into the blocks it reserved and unlinks it, one on
// another host fetches the bytes first (kv_stage_socket.h in the gRPC frontend) and the prefill
// process unlinks the object once it sent them.
//
// The blocks are copied either here, by the caller's thread (write_kv_stage / read_kv_stage, host
// memory only), or by the process's KV transport on its own thread (KvStageWriter / KvStageReader
// describe the object as host memory the transport writes or reads; host_copy also moves KV that
// lives on a GPU this way).
// Threading: plain functions and single-thread objects; each stage is written by one thread and
// read by one.
#pragma once

#include <headway/abi.h>
#include <headway/serving/request_stream.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace headway::serving {

class MappedObject;

// A new stage while its blocks are written: the object exists, is mapped writable, and memory()
// describes it as `block_count` blocks of `block_bytes`, back to back, in host memory (a KV
// transport's destination). commit() hands the stage out; destroyed before that, the object is
// removed. Throws core::Error naming the object when it cannot be made (no space in /dev/shm).
class KvStageWriter {
 public:
  KvStageWriter(const std::string& name, uint32_t block_count, uint64_t block_bytes);
  ~KvStageWriter();
  KvStageWriter(const KvStageWriter&) = delete;
  KvStageWriter& operator=(const KvStageWriter&) = delete;

  hw_memory_desc memory() const;
  // The stage's description once its blocks are written; the object stays for its reader.
  KvStage commit(uint32_t computed_tokens, uint32_t block_size);

 private:
  std::unique_ptr<MappedObject> object_;
  std::string name_;
  uint32_t block_count_ = 0;
  uint64_t block_bytes_ = 0;
  bool committed_ = false;
};

// Writes `blocks` of `memory` to a new shared-memory object called `name` ("/headway-kv-...") with
// memcpy on this thread. Throws core::Error naming the object when it cannot (not host memory, no
// space in /dev/shm).
KvStage write_kv_stage(const std::string& name, const hw_memory_desc& memory,
                       std::span<const uint32_t> blocks, uint32_t computed_tokens,
                       uint32_t block_size);

// Why the stage's own numbers disagree (its block count is not what its computed tokens need in
// blocks of its size, or a size is 0); empty when they agree.
std::string kv_stage_layout_problem(const KvStage& stage);

// Why an engine of `model` cannot decode on `stage`: the model that wrote it has other layers,
// KV heads or head width (equal bytes per block do not make equal KV). Empty when they agree, or
// when either does not say (a stage from a process before KvStage::layers, a model reporting 0).
std::string kv_stage_model_problem(const KvStage& stage, const hw_model_info& model);

// Why `stage` cannot be read into `memory` (no KV memory, another block layout, the object gone or
// shorter than it claims, its fetch failed); empty when it can.
std::string kv_stage_problem(const KvStage& stage, const hw_memory_desc& memory,
                             uint32_t block_size);

// The bytes of a stage (mapped from its object on this host, or the copy fetched from another),
// described as `block_count` host blocks back to back: a KV transport's source, read-only, valid
// while this lives. error() says why they cannot be read (then memory() has no base).
class KvStageReader {
 public:
  explicit KvStageReader(const KvStage& stage);
  ~KvStageReader();
  KvStageReader(const KvStageReader&) = delete;
  KvStageReader& operator=(const KvStageReader&) = delete;

  const std::string& error() const { return error_; }
  hw_memory_desc memory() const;

 private:
  std::unique_ptr<MappedObject> mapping_;
  std::shared_ptr<const std::vector<unsigned char>> fetched_;
  const unsigned char* data_ = nullptr;
  uint32_t block_count_ = 0;
  uint64_t block_bytes_ = 0;
  std::string error_;
};

// Why read_kv_stage() cannot copy into `memory` (it is not host memory: a KV transport must copy
// it); empty when it can.
std::string kv_stage_memcpy_problem(const hw_memory_desc& memory);

// Copies the stage's blocks into `blocks` of `memory` (host memory, which kv_stage_problem()
// accepted) with memcpy on this thread, from block `first` on: the blocks before it hold their KV
// already (the reader's prefix cache had them). Returns an empty string, or why the copy failed.
std::string read_kv_stage(const KvStage& stage, const hw_memory_desc& memory,
                          std::span<const uint32_t> blocks, uint32_t first = 0);

// Removes the object (after reading it, or when nobody will); nothing for a name that is not a
// staged KV's (is_kv_stage_name).
void discard_kv_stage(const std::string& name);

// Frees the KV of a hand-off that nobody will take: a staged object is removed here; KV held in
// its prefill process's engine (stage.held) only its holder can free, so `drop_held(stage)` is
// called to ask it (each caller reaches the holder its own way).
template <class DropHeld>
void abandon_kv_stage(const KvStage& stage, DropHeld&& drop_held) {
  if (stage.held) {
    drop_held(stage);
  } else {
    discard_kv_stage(stage.shm_name);
  }
}

// True when an object called `name` exists on this host (its /dev/shm).
bool kv_stage_is_here(const std::string& name);

// The bytes of staged object `name`, mapped read-only while this lives (FetchKvStage sends them
// to a process on another host). error() says why they could not be mapped (then bytes() is
// empty). Not copyable; one thread.
class StagedBytes {
 public:
  explicit StagedBytes(const std::string& name);
  ~StagedBytes();
  StagedBytes(const StagedBytes&) = delete;
  StagedBytes& operator=(const StagedBytes&) = delete;
  const std::string& error() const;
  std::span<const unsigned char> bytes() const;

 private:
  std::unique_ptr<MappedObject> object_;
};

// Every staged object's name starts with this; names from requests must, too.
inline constexpr const char* kKvStagePrefix = "/headway-kv-";
// True for a name this module could have made: the prefix and no further '/'. A request naming
// anything else is refused before the name is opened or unlinked.
bool is_kv_stage_name(const std::string& name);
// A fresh name for request `request` of engine `engine` of this process: its owner tag (pid
// namespace and pid, sdk/shm_owner.hpp) and a random per-process part, so that other processes can
// neither guess it nor collide with it.
std::string kv_stage_name(uint32_t engine, uint64_t request);
// What every name kv_stage_name() makes in this process starts with
// ("/headway-kv-<pid namespace>-<pid>-<random>-").
const std::string& own_kv_stage_prefix();
// True for a name this process made: the only objects FetchKvStage sends (and then removes).
bool is_own_kv_stage_name(const std::string& name);
// Removes staged objects whose writing process no longer runs (it crashed before anyone read
// them); objects of processes in another pid namespace are left alone (their pids mean nothing
// here). Returns how many. Called when an engine process starts.
size_t sweep_orphaned_kv_stages();
// Removes the staged objects that nobody read within `max_age_s` of being written: this
// process's (the request was given up, or its decode process died before reading it), and those
// of writers that have exited (as sweep_orphaned_kv_stages() judges them). Any other stage goes
// once older than kAbandonedAgeFactor x `max_age_s`, and kAbandonedMinAgeS at least: its writer,
// were it running, would have removed it long before. Returns how many.
inline constexpr double kAbandonedAgeFactor = 10.0;
inline constexpr double kAbandonedMinAgeS = 1800.0;
size_t sweep_expired_kv_stages(double max_age_s);

}  // namespace headway::serving
