// Staged KV between hosts (kv_stage_socket.h): an engine process's frontend sends a staged object
// with FetchKvStage and fetches a kv_source stage before submitting; the receiving side detects
// every way a chunk stream can be wrong, and a failed fetch leaves the request usable (unusable
// says why, the service prefills instead).
#include "kv_stage_socket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "frontend_fixture.h"
#include "kv_stage_file.h"
#include "proto_conversion.h"

namespace headway::serving::testing {
namespace {

using grpc_frontend::kKvChunkBytes;
using grpc_frontend::kv_chunk_crc32;
using grpc_frontend::kv_chunk_problem;
using grpc_frontend::KvStageFetcher;
using ::testing::HasSubstr;

constexpr const char* kKey = "stage-key";

// A host KV cache of `blocks` blocks whose bytes count up, and a stage of its first `staged`
// blocks, reversed (so that block order matters).
struct StagedCache {
  StagedCache(uint32_t blocks, uint64_t block_bytes, uint32_t staged)
      : bytes(blocks * block_bytes) {
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<unsigned char>(i * 7 + i / 251);
    memory.device_id = -1;
    memory.kind = HW_MEMORY_HOST;
    memory.base = bytes.data();
    memory.bytes = bytes.size();
    memory.block_bytes = block_bytes;
    memory.block_stride = block_bytes;
    for (uint32_t b = staged; b-- > 0;) order.push_back(b);
    static int next = 0;
    name = kv_stage_name(7, static_cast<uint64_t>(::getpid()) * 1000 + next++);
    stage = write_kv_stage(name, memory, order, /*computed_tokens=*/staged * 16, /*block_size=*/16);
  }
  ~StagedCache() { discard_kv_stage(name); }
  // The stage's bytes as the object holds them.
  std::vector<unsigned char> expected() const {
    std::vector<unsigned char> out;
    for (uint32_t b : order) {
      out.insert(out.end(), bytes.begin() + b * memory.block_bytes,
                 bytes.begin() + (b + 1) * memory.block_bytes);
    }
    return out;
  }

  std::vector<unsigned char> bytes;
  hw_memory_desc memory{};
  std::vector<uint32_t> order;
  std::string name;
  KvStage stage;
};

v1::KvChunk chunk_of(const std::string& data, uint64_t offset, uint64_t total, bool crc) {
  v1::KvChunk chunk;
  chunk.set_offset(offset);
  chunk.set_total_bytes(total);
  chunk.set_data(data);
  chunk.set_has_crc32(crc);
  if (crc) chunk.set_crc32(kv_chunk_crc32(data.data(), data.size()));
  return chunk;
}

TEST(KvChunkProblem, AcceptsTheNextChunkWithOrWithoutAChecksum) {
  EXPECT_EQ(kv_chunk_problem(chunk_of("abcd", 0, 8, true), 0, 8), "");
  EXPECT_EQ(kv_chunk_problem(chunk_of("efgh", 4, 8, false), 4, 8), "");
  // zlib's CRC-32 of "123456789" is the standard check value.
  EXPECT_EQ(kv_chunk_crc32("123456789", 9), 0xCBF43926u);
}

TEST(KvChunkProblem, NamesALostReorderedOversizedOrCorruptChunk) {
  EXPECT_THAT(kv_chunk_problem(chunk_of("efgh", 4, 8, true), 0, 8), HasSubstr("lost or reordered"));
  EXPECT_THAT(kv_chunk_problem(chunk_of("abcd", 0, 16, true), 0, 8), HasSubstr("the stage says 8"));
  EXPECT_THAT(kv_chunk_problem(chunk_of("abcdefgh", 4, 8, true), 4, 8),
              HasSubstr("8 bytes at byte 4 of 8"));
  EXPECT_THAT(kv_chunk_problem(chunk_of("", 4, 8, true), 4, 8), HasSubstr("0 bytes"));
  v1::KvChunk corrupt = chunk_of("abcd", 0, 8, true);
  corrupt.mutable_data()->at(2) ^= 0x10;  // one bit flipped on the way
  EXPECT_THAT(kv_chunk_problem(corrupt, 0, 8), HasSubstr("corrupt"));
}

// An engine process's frontend (FetchKvStage served, kv_source stages fetched) with an API key.
class EngineProcessFrontend : public FrontendFixture {
 protected:
  GrpcOptions options() const override {
    GrpcOptions options;
    options.port = 0;
    options.api_key = kKey;
    options.engine_process = true;
    options.kv_stage_always_fetch = true;  // one host: force the socket
    options.kv_stage_checksums = true;
    return options;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(frontend_->port()); }

  // Sends a Generate whose kv_source is `stage`, to be fetched from this frontend; returns the
  // kv_source the service was given (fetched or not).
  KvStage submitted_stage(const KvStage& stage) {
    v1::GenerateRequest request = token_request({72, 105});
    grpc_frontend::to_proto(stage, *request.mutable_kv_source());
    request.mutable_kv_source()->set_source_address(address());
    request.add_generated_ids(33);
    fake_.set_script({{1}, Finish::kLength, {}, {}});
    const GenerateResult result = generate(request, kKey);
    EXPECT_TRUE(result.status.ok()) << result.status.error_message();
    const std::vector<GenerateInput> inputs = fake_.wait_for_submitted(1);
    if (!inputs[0].kv_source.has_value()) {
      ADD_FAILURE() << "submitted without its kv_source";
      return {};
    }
    return *inputs[0].kv_source;
  }
};

TEST_F(EngineProcessFrontend, AFetchedStageHasTheObjectsBytesAndTheObjectIsGone) {
  // More than two chunks, the last one partial.
  StagedCache cache(/*blocks=*/12, /*block_bytes=*/kKvChunkBytes / 4 + 1000, /*staged=*/10);
  KvStage stage = cache.stage;
  stage.source_address = address();
  KvStageFetcher(kKey, /*always=*/true).make_readable(stage, ModelSummary{}, nullptr);
  EXPECT_EQ(stage.unusable, "");
  ASSERT_NE(stage.fetched, nullptr);
  EXPECT_EQ(*stage.fetched, cache.expected());
  EXPECT_GT(stage.fetch_seconds, 0.0);
  EXPECT_FALSE(kv_stage_is_here(cache.name)) << "the sender unlinks what it sent";

  // Read into another cache's blocks, it lands where the decode engine reserved them.
  std::vector<unsigned char> target(12 * cache.memory.block_bytes, 0);
  hw_memory_desc into = cache.memory;
  into.base = target.data();
  EXPECT_EQ(kv_stage_problem(stage, into, 16), "");
  const std::vector<uint32_t> reserved = {3, 5, 7, 9, 11, 0, 1, 2, 4, 6};
  EXPECT_EQ(read_kv_stage(stage, into, reserved), "");
  const std::vector<unsigned char> expected = cache.expected();
  for (size_t i = 0; i < reserved.size(); ++i) {
    EXPECT_EQ(std::memcmp(target.data() + reserved[i] * into.block_bytes,
                          expected.data() + i * into.block_bytes, into.block_bytes),
              0)
        << "block " << i;
  }
}

TEST_F(EngineProcessFrontend, GenerateFetchesTheStageBeforeItSubmits) {
  StagedCache cache(4, 4096, 3);
  const KvStage submitted = submitted_stage(cache.stage);
  EXPECT_EQ(submitted.unusable, "");
  ASSERT_NE(submitted.fetched, nullptr);
  EXPECT_EQ(*submitted.fetched, cache.expected());
}

TEST_F(EngineProcessFrontend, AFailedFetchLeavesTheRequestToBePrefilledSayingWhy) {
  StagedCache cache(4, 4096, 3);
  KvStage gone = cache.stage;
  gone.source_address = address();
  discard_kv_stage(cache.name);
  KvStageFetcher fetcher(kKey, /*always=*/true);
  fetcher.make_readable(gone, ModelSummary{}, nullptr);
  EXPECT_EQ(gone.fetched, nullptr);
  EXPECT_THAT(gone.unusable, HasSubstr("no staged KV here"));
  EXPECT_THAT(gone.unusable, HasSubstr(address()));

  StagedCache other(4, 4096, 3);
  KvStage wrong_key = other.stage;
  wrong_key.source_address = address();
  KvStageFetcher("other-key", true).make_readable(wrong_key, ModelSummary{}, nullptr);
  EXPECT_THAT(wrong_key.unusable, HasSubstr("gRPC status 16"));  // UNAUTHENTICATED
  EXPECT_TRUE(kv_stage_is_here(other.name)) << "a refused caller must not remove it";

  KvStage nowhere = cache.stage;
  nowhere.source_address = "127.0.0.1:1";  // nobody listens there
  fetcher.make_readable(nowhere, ModelSummary{}, nullptr);
  EXPECT_THAT(nowhere.unusable, HasSubstr("127.0.0.1:1"));

  KvStage unlocated = cache.stage;
  fetcher.make_readable(unlocated, ModelSummary{}, nullptr);
  EXPECT_THAT(unlocated.unusable, HasSubstr("does not say where"));

  KvStage lying = other.stage;
  lying.source_address = address();
  lying.block_bytes = 2048;  // consistent numbers, but the object holds blocks of 4096
  fetcher.make_readable(lying, ModelSummary{}, nullptr);
  EXPECT_THAT(lying.unusable, HasSubstr("the stage says"));
}

TEST_F(EngineProcessFrontend, FetchKvStageRefusesNamesThatAreNotStages) {
  grpc::ClientContext context;
  authorize(context, kKey);
  v1::FetchKvStageRequest request;
  request.set_shm_name("/etc-passwd");
  auto reader = stub_->FetchKvStage(&context, request);
  v1::KvChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("/etc-passwd"));
}

TEST_F(EngineProcessFrontend, FetchKvStageSendsOnlyWhatThisProcessStaged) {
  // Another (running) process's stage on this host: pid 1's name, an object of this test.
  const std::string theirs = std::string(kKvStagePrefix) + "1-0000000000000000-0-777";
  StagedCache cache(2, 4096, 1);
  ASSERT_EQ(::rename(("/dev/shm" + cache.name).c_str(), ("/dev/shm" + theirs).c_str()), 0);
  grpc::ClientContext context;
  authorize(context, kKey);
  v1::FetchKvStageRequest request;
  request.set_shm_name(theirs);
  auto reader = stub_->FetchKvStage(&context, request);
  v1::KvChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("not staged by this process"));
  EXPECT_TRUE(kv_stage_is_here(theirs)) << "never removed either";
  discard_kv_stage(theirs);
}

TEST_F(EngineProcessFrontend, AStageWhoseNumbersDisagreeIsNotFetched) {
  StagedCache cache(4, 4096, 3);
  KvStage lying = cache.stage;
  lying.source_address = address();
  lying.computed_tokens = 100;  // 7 blocks of 16 tokens, not 3
  KvStageFetcher(kKey, true).make_readable(lying, ModelSummary{}, nullptr);
  EXPECT_THAT(lying.unusable, HasSubstr("cannot hold exactly 100 computed tokens"));
  EXPECT_TRUE(kv_stage_is_here(cache.name)) << "nothing was asked for";
}

// Another model's KV (Llama 3.1 8B and 70B share vocabulary and tokenizer) would be refused by
// the engine after the fetch: it is not fetched at all, and the request is prefilled here saying
// why. Where either side does not say its shape, the stage is fetched as before.
TEST_F(EngineProcessFrontend, AnotherModelsStageIsNotFetched) {
  StagedCache cache(4, 4096, 3);
  KvStage other_model = cache.stage;
  other_model.source_address = address();
  other_model.layers = 80;
  other_model.kv_heads = 8;
  other_model.head_dim = 128;
  ModelSummary here;
  here.layers = 32;
  here.kv_heads = 8;
  here.head_dim = 128;
  KvStageFetcher fetcher(kKey, /*always=*/true);
  fetcher.make_readable(other_model, here, nullptr);
  EXPECT_EQ(other_model.fetched, nullptr);
  EXPECT_THAT(other_model.unusable, HasSubstr("a model of 80 layers x 8 KV heads x 128 dims"));
  EXPECT_THAT(other_model.unusable, HasSubstr("this engine's model has 32 x 8 x 128"));
  EXPECT_TRUE(kv_stage_is_here(cache.name)) << "nothing was asked for";

  // Through Generate: the frontend hands the service its own model's shape.
  fake_.set_model({.name = "m",
                   .max_model_len = 64,
                   .vocab = 256,
                   .tokenizer = "byte",
                   .layers = 32,
                   .kv_heads = 8,
                   .head_dim = 128});
  const KvStage submitted = submitted_stage(other_model);
  EXPECT_EQ(submitted.fetched, nullptr);
  EXPECT_THAT(submitted.unusable, HasSubstr("80 layers"));
  EXPECT_TRUE(kv_stage_is_here(cache.name));

  KvStage unsaid_here = other_model;
  unsaid_here.unusable.clear();
  fetcher.make_readable(unsaid_here, ModelSummary{}, nullptr);
  EXPECT_EQ(unsaid_here.unusable, "");
  ASSERT_NE(unsaid_here.fetched, nullptr);
  EXPECT_EQ(*unsaid_here.fetched, cache.expected());
}

// A frontend that faces clients never hands out staged KV.
class ClientFacingFrontend : public FrontendFixture {};

TEST_F(ClientFacingFrontend, RefusesFetchKvStage) {
  StagedCache cache(2, 4096, 1);
  grpc::ClientContext context;
  v1::FetchKvStageRequest request;
  request.set_shm_name(cache.name);
  auto reader = stub_->FetchKvStage(&context, request);
  v1::KvChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("role = \"engine\""));
  EXPECT_TRUE(kv_stage_is_here(cache.name));
}

}  // namespace
}  // namespace headway::serving::testing
