#include "kv_stage_socket.h"

#include <fmt/format.h>
#include <headway/serving/echoed_input.h>

#include <algorithm>
#include <atomic>
#include <boost/crc.hpp>
#include <chrono>
#include <vector>

#include "kv_stage_file.h"

namespace headway::serving::grpc_frontend {

uint32_t kv_chunk_crc32(const void* data, size_t size) {
  boost::crc_32_type crc;
  crc.process_bytes(data, size);
  return crc.checksum();
}

std::string kv_chunk_problem(const v1::KvChunk& chunk, uint64_t received, uint64_t total_bytes) {
  if (chunk.total_bytes() != total_bytes) {
    return fmt::format("the sender has {} bytes, the stage says {}", chunk.total_bytes(),
                       total_bytes);
  }
  if (chunk.offset() != received) {
    return fmt::format("a chunk at byte {} arrived after {} bytes (lost or reordered)",
                       chunk.offset(), received);
  }
  if (chunk.data().empty() || chunk.data().size() > total_bytes - received) {
    return fmt::format("a chunk of {} bytes at byte {} of {}", chunk.data().size(), received,
                       total_bytes);
  }
  if (chunk.has_crc32()) {
    const uint32_t crc = kv_chunk_crc32(chunk.data().data(), chunk.data().size());
    if (crc != chunk.crc32()) {
      return fmt::format("the chunk at byte {} is corrupt (CRC-32 {:08x}, sent {:08x})", received,
                         crc, chunk.crc32());
    }
  }
  return {};
}

grpc::Status send_kv_stage(const std::string& name, bool checksums, grpc::ServerContext& context,
                           grpc::ServerWriter<v1::KvChunk>& writer) {
  if (!is_kv_stage_name(name)) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            fmt::format("shm_name: {} is not a staged KV's name (they start with \"{}\")",
                        quote_input(name), kKvStagePrefix)};
  }
  // Only what this process staged: never another process's (or another user's) object.
  if (!is_own_kv_stage_name(name)) {
    return {grpc::StatusCode::NOT_FOUND,
            fmt::format("shm_name: {} was not staged by this process", quote_input(name))};
  }
  grpc::Status status = grpc::Status::OK;
  {
    const StagedBytes staged(name);
    if (!staged.error().empty()) {
      return {grpc::StatusCode::NOT_FOUND,
              fmt::format("no staged KV here to send ({})", staged.error())};
    }
    const std::span<const unsigned char> bytes = staged.bytes();
    v1::KvChunk chunk;
    chunk.set_total_bytes(bytes.size());
    for (size_t offset = 0; offset < bytes.size(); offset += kKvChunkBytes) {
      if (context.IsCancelled()) {
        status = {grpc::StatusCode::CANCELLED, "the fetching process went away"};
        break;
      }
      const size_t size = std::min(kKvChunkBytes, bytes.size() - offset);
      chunk.set_offset(offset);
      chunk.set_data(bytes.data() + offset, size);
      chunk.set_has_crc32(checksums);
      chunk.set_crc32(checksums ? kv_chunk_crc32(bytes.data() + offset, size) : 0);
      if (!writer.Write(chunk)) {
        status = {grpc::StatusCode::CANCELLED, "the fetching process went away"};
        break;
      }
    }
  }
  // Sent or not, nobody will read it again: a failed fetch prefills the request instead.
  discard_kv_stage(name);
  return status;
}

namespace {

grpc::ChannelArguments fetch_channel_arguments() {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(static_cast<int>(2 * kKvChunkBytes));
  return arguments;
}

}  // namespace

KvStageFetcher::KvStageFetcher(std::string api_key, bool always)
    : api_key_(std::move(api_key)), always_(always), channels_(fetch_channel_arguments()) {}

namespace {

// Bytes of fetched KV held by this process, waiting to be copied into an engine's blocks: the
// bound that keeps a decode process whose engine is full from pulling stages into its heap until
// it runs out of memory (beyond it, requests are prefilled here instead).
std::atomic<uint64_t> fetched_bytes_held{0};

// A buffer of `bytes` that returns them to fetched_bytes_held when the last owner drops it.
std::shared_ptr<std::vector<unsigned char>> counted_buffer(uint64_t bytes) {
  return std::shared_ptr<std::vector<unsigned char>>(new std::vector<unsigned char>(),
                                                     [bytes](std::vector<unsigned char>* buffer) {
                                                       fetched_bytes_held.fetch_sub(bytes);
                                                       delete buffer;
                                                     });
}

}  // namespace

void KvStageFetcher::make_readable(KvStage& stage, const ModelSummary& model,
                                   const grpc::ServerContext* parent) {
  // A name that is not a stage's is refused by the service, before anything is opened.
  if (!is_kv_stage_name(stage.shm_name)) return;
  if (stage.held) return;  // not in shared memory: the engine pulls it over a peer link
  if (!always_ && kv_stage_is_here(stage.shm_name)) return;
  // Another model's KV: the engine checks the same and prefills the request instead, so its bytes
  // would cross the network for nothing.
  hw_model_info shape{};
  shape.layers = model.layers;
  shape.kv_heads = model.kv_heads;
  shape.head_dim = model.head_dim;
  if (std::string problem = kv_stage_model_problem(stage, shape); !problem.empty()) {
    stage.unusable = std::move(problem);
    return;
  }
  if (stage.source_address.empty()) {
    stage.unusable = "it is not on this host and the request does not say where it is";
    return;
  }
  // The layout must be self-consistent before any byte is asked for (the engine checks it
  // against its own layout later).
  if (std::string problem = kv_stage_layout_problem(stage); !problem.empty()) {
    stage.unusable = std::move(problem);
    return;
  }
  const uint64_t total = uint64_t{stage.block_count} * stage.block_bytes;
  if (fetched_bytes_held.fetch_add(total) + total > kMaxFetchedKvBytes) {
    fetched_bytes_held.fetch_sub(total);
    stage.unusable = fmt::format(
        "{} bytes of fetched KV already wait here for KV blocks, the most this process holds "
        "({} bytes); this one would add {}",
        fetched_bytes_held.load(), kMaxFetchedKvBytes, total);
    return;
  }
  try {
    fetch(stage, parent, counted_buffer(total));  // gives the bytes back when dropped
  } catch (const std::exception& e) {  // out of memory, a gRPC exception: prefilled instead
    stage.fetched.reset();
    stage.unusable = fmt::format("fetching it from {} failed: {}", stage.source_address, e.what());
  }
}

void KvStageFetcher::fetch(KvStage& stage, const grpc::ServerContext* parent,
                           std::shared_ptr<std::vector<unsigned char>> bytes) {
  const auto begin = std::chrono::steady_clock::now();
  std::unique_ptr<grpc::ClientContext> context =
      parent != nullptr ? grpc::ClientContext::FromServerContext(*parent)
                        : std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + kKvFetchTimeout);
  if (!api_key_.empty()) context->AddMetadata("authorization", "Bearer " + api_key_);
  v1::FetchKvStageRequest request;
  request.set_shm_name(stage.shm_name);
  v1::Headway::Stub stub(channels_.channel_to(stage.source_address));
  std::unique_ptr<grpc::ClientReader<v1::KvChunk>> reader =
      stub.FetchKvStage(context.get(), request);

  const uint64_t total = uint64_t{stage.block_count} * stage.block_bytes;
  // Grown as chunks arrive (never more than the sender has), not reserved from the request.
  std::string problem;
  v1::KvChunk chunk;
  while (reader->Read(&chunk)) {
    problem = kv_chunk_problem(chunk, bytes->size(), total);
    if (!problem.empty()) {
      context->TryCancel();
      while (reader->Read(&chunk)) {  // a reader must be drained before Finish()
      }
      break;
    }
    // The first chunk confirmed the sender holds `total` bytes: room for all of them at once.
    if (bytes->empty()) bytes->reserve(total);
    const auto* data = reinterpret_cast<const unsigned char*>(chunk.data().data());
    bytes->insert(bytes->end(), data, data + chunk.data().size());
  }
  const grpc::Status status = reader->Finish();
  if (problem.empty() && !status.ok()) {
    problem = fmt::format("{} (gRPC status {})", status.error_message(),
                          static_cast<int>(status.error_code()));
  }
  if (problem.empty() && bytes->size() != total) {
    problem = fmt::format("the stream ended after {} of {} bytes", bytes->size(), total);
  }
  if (!problem.empty()) {
    stage.unusable = fmt::format("fetching it from {} failed: {}", stage.source_address, problem);
    return;
  }
  stage.fetch_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  stage.fetched = std::move(bytes);
}

}  // namespace headway::serving::grpc_frontend
