// Staged KV between hosts (disaggregation across hosts, docs/serving.md "Several processes"): a
// decode engine process on another host than the prefill process cannot open the prefill
// process's shared-memory object, so it fetches the bytes over gRPC (FetchKvStage) before it
// submits the request, and the driver copies them into its blocks as it would the object's.
//
// The object goes in chunks of kKvChunkBytes, in order, each with its offset and the total (so a
// lost, reordered or truncated chunk is detected), and a CRC-32 of its bytes when the sender
// checksums (debug builds, or [server] kv_stage_checksums = true): TCP's own 16-bit checksum lets
// rare corruptions through, and KV that is wrong in a few bytes gives plausible but wrong tokens.
// A stage is sent at most once: the sender unlinks it after the attempt, whatever its outcome,
// and a fetch that fails leaves the request to be prefilled on the decode engine.
//
// Threading: send_kv_stage() runs on a gRPC handler thread; KvStageFetcher::fetch() may be called
// from many handler threads at once (its channel cache is locked).
#pragma once

#include <grpcpp/grpcpp.h>
#include <headway/serving/generation_service.h>
#include <headway/serving/request_stream.h>
#include <headway/v1/headway.grpc.pb.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "channel_cache.h"

namespace headway::serving::grpc_frontend {

inline constexpr size_t kKvChunkBytes = size_t{1} << 20;
// How long one fetch may take before it is given up (and the request prefilled here instead).
inline constexpr std::chrono::seconds kKvFetchTimeout{60};
// The most fetched KV a process holds while it waits for KV blocks; beyond it, requests are
// prefilled here instead of fetched.
inline constexpr uint64_t kMaxFetchedKvBytes = uint64_t{4} << 30;

// CRC-32 (IEEE 802.3 polynomial, zlib's) of `size` bytes.
uint32_t kv_chunk_crc32(const void* data, size_t size);

// Why `chunk` is not the next one of a `total_bytes`-byte stage of which `received` bytes arrived
// (offset, total, size or checksum wrong); empty when it is.
std::string kv_chunk_problem(const v1::KvChunk& chunk, uint64_t received, uint64_t total_bytes);

// Sends staged object `name` to the caller in chunks (with checksums when `checksums`), then
// unlinks it. NOT_FOUND when there is no such object (never read or already sent), CANCELLED when
// the caller went away.
grpc::Status send_kv_stage(const std::string& name, bool checksums, grpc::ServerContext& context,
                           grpc::ServerWriter<v1::KvChunk>& writer);

class KvStageFetcher {
 public:
  // `api_key`: sent to the process that staged the KV (every process of a deployment shares it).
  // `always`: fetch even a stage that is on this host (kv_stage_transport = "socket").
  KvStageFetcher(std::string api_key, bool always);

  // Makes `stage` (a kv_source) readable here: nothing to do when its object is on this host;
  // otherwise fetches its bytes from stage.source_address into stage.fetched, or sets
  // stage.unusable to why it could not. Nothing is fetched for the KV of a model of another shape
  // than `model` (this process's) where both say theirs: the engine would refuse it. The
  // cancellation and deadline of `parent` (the call that carries the request; null in tests) carry
  // over to the fetch: a caller that goes away stops it.
  void make_readable(KvStage& stage, const ModelSummary& model, const grpc::ServerContext* parent);

 private:
  // Reads the chunks into `bytes` (empty); sets stage.fetched to it, or stage.unusable.
  void fetch(KvStage& stage, const grpc::ServerContext* parent,
             std::shared_ptr<std::vector<unsigned char>> bytes);
  const std::string api_key_;
  const bool always_;
  ChannelCache channels_;
};

}  // namespace headway::serving::grpc_frontend
