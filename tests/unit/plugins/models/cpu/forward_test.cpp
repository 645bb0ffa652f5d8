// The cpu model's forward pass, driven through the plugin's C ABI: agreement with the independent
// NumPy reference (tests/reference/llama_reference.py), chunking invariance, batch invariance, and
// decode-after-prefill against full recomputation.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_model_harness.h"
#include "tiny_checkpoint.h"

namespace headway::models::cpu::testing {
namespace {

// Runs the NumPy reference on `requests` (tokens + positions) and returns one logits row per
// requested position.
std::vector<std::vector<double>> reference_logits(const std::filesystem::path& checkpoint,
                                                  const nlohmann::json& requests, uint32_t vocab) {
  const std::filesystem::path in = checkpoint / "requests.json";
  const std::filesystem::path out = checkpoint / "reference.bin";
  std::ofstream(in) << nlohmann::json{{"requests", requests}}.dump();
  const std::string command = std::string("/usr/bin/python3 ") + HEADWAY_SOURCE_DIR +
                              "/tests/reference/llama_reference.py --checkpoint '" +
                              checkpoint.string() + "' --requests '" + in.string() + "' --out '" +
                              out.string() + "'";
  const int rc = std::system(command.c_str());
  if (rc != 0)
    throw std::runtime_error("reference failed (" + std::to_string(rc) + "): " + command);
  std::ifstream f(out, std::ios::binary);
  std::vector<std::vector<double>> rows;
  std::vector<double> row(vocab);
  while (f.read(reinterpret_cast<char*>(row.data()), vocab * sizeof(double))) rows.push_back(row);
  return rows;
}

struct ReferenceCase {
  const char* name;
  DType dtype;
  bool tied;
  // Widths that are not multiples of the 8- and 32-wide vector loops (hidden 72, FFN 100), so the
  // half-precision kernels' remainder paths run.
  bool odd_widths = false;
  // Extra model options, e.g. ", mmap = false" (weights copied into huge pages).
  const char* options = "";
  const char* architecture = "llama";  // TinyModelSpec::architecture
  bool attention_bias = false;         // TinyModelSpec::attention_bias (o_proj's bias too)
  uint32_t head_dim = 0;               // TinyModelSpec::head_dim
};

class ReferenceTest : public ::testing::TestWithParam<ReferenceCase> {};

// Several prompts, prefilled in uneven chunks, then several greedy decode steps each; every
// logits row must match NumPy within 1e-4 relative.
TEST_P(ReferenceTest, MatchesNumpyForPrefillAndDecode) {
  TempDir dir(GetParam().name);
  TinyModelSpec spec = small_spec(GetParam().dtype);
  spec.tie_word_embeddings = GetParam().tied;
  spec.architecture = GetParam().architecture;
  spec.attention_bias = GetParam().attention_bias;
  spec.head_dim = GetParam().head_dim;
  if (GetParam().odd_widths) {
    spec.hidden = 72;  // 4 heads of 18
    spec.ffn = 100;
  }
  write_tiny_checkpoint(spec, dir.path());
  ModelHarness model(dir.path(), GetParam().options);
  const uint32_t vocab = model.info().vocab;

  // The last prompt spans several 256-key chunks of the prefill attention kernel.
  const std::vector<std::vector<uint32_t>> chunkings = {{5}, {3, 14}, {1, 20, 12}, {130, 3, 170}};
  constexpr int kDecodeSteps = 4;
  nlohmann::json requests = nlohmann::json::array();
  std::vector<std::vector<float>> ours;
  for (size_t r = 0; r < chunkings.size(); ++r) {
    uint32_t length = 0;
    for (uint32_t c : chunkings[r]) length += c;
    const auto prompt = random_tokens(length, vocab, 100 + static_cast<uint32_t>(r));
    std::vector<float> logits = model.prefill(r, prompt, chunkings[r]);
    std::vector<int> positions = {static_cast<int>(length) - 1};
    ours.push_back(logits);
    for (int d = 0; d < kDecodeSteps; ++d) {
      logits = model.step({{r, {argmax(logits)}}}).at(0);
      ours.push_back(logits);
      positions.push_back(static_cast<int>(length) + d);
    }
    requests.push_back({{"tokens", model.history(r)}, {"positions", positions}});
  }
  const auto expected = reference_logits(dir.path(), requests, vocab);
  ASSERT_EQ(expected.size(), ours.size());
  double worst = 0.0;
  for (size_t i = 0; i < ours.size(); ++i) {
    worst = std::max(worst, relative_error(ours[i], expected[i]));
    EXPECT_LT(relative_error(ours[i], expected[i]), 1e-4) << "row " << i;
    EXPECT_EQ(argmax(ours[i]), argmax(std::vector<float>(expected[i].begin(), expected[i].end())))
        << "row " << i;
  }
  std::printf("%s: worst relative error against NumPy over %zu rows: %.3g\n", GetParam().name,
              ours.size(), worst);
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, ReferenceTest,
    ::testing::Values(
        ReferenceCase{"f32", DType::kF32, false}, ReferenceCase{"f16", DType::kF16, false},
        ReferenceCase{"bf16_tied", DType::kBF16, true},
        ReferenceCase{"f16_odd_widths_copied", DType::kF16, false, true, ", mmap = false"},
        ReferenceCase{"bf16_odd_widths", DType::kBF16, false, true},
        ReferenceCase{"qwen2_bf16_tied", DType::kBF16, true, false, "", "qwen2"},
        ReferenceCase{"qwen3_f16", DType::kF16, false, false, "", "qwen3"},
        ReferenceCase{"qwen2_f32_odd_widths", DType::kF32, false, true, "", "qwen2"},
        ReferenceCase{"llama_attention_bias_f32", DType::kF32, false, false, "", "llama", true},
        // Qwen 3's shape: heads wider than hidden / heads.
        ReferenceCase{"qwen3_wide_heads_bf16", DType::kBF16, true, false, "", "qwen3", false, 32}),
    [](const auto& info) { return std::string(info.param.name); });

class InvarianceTest : public ::testing::Test {
 protected:
  void SetUp() override { write_tiny_checkpoint(small_spec(DType::kF16), dir_.path()); }
  TempDir dir_{"invariance"};
};

TEST_F(InvarianceTest, AnyChunkingGivesTheSameLogitsAsOneWholePrefill) {
  ModelHarness model(dir_.path());
  const auto prompt = random_tokens(41, model.info().vocab, 1);
  const std::vector<float> whole = model.prefill(0, prompt, {41});
  const std::vector<std::vector<uint32_t>> chunkings = {
      {1, 40}, {40, 1}, {4, 4, 4, 4, 25}, {3, 7, 11, 20}, {16, 16, 9}, {17, 1, 1, 1, 21}};
  uint64_t id = 1;
  for (const auto& chunks : chunkings) {
    const std::vector<float> chunked = model.prefill(id++, prompt, chunks);
    EXPECT_LT(relative_error(chunked, whole), 1e-5) << "chunks starting " << chunks[0];
  }
}

TEST_F(InvarianceTest, LongPromptsChunkedAcrossAttentionChunksAgree) {
  ModelHarness model(dir_.path(), "", 16, 512);
  const auto prompt = random_tokens(600, model.info().vocab, 9);
  const std::vector<float> whole = model.prefill(0, prompt, {600});
  EXPECT_LT(relative_error(model.prefill(1, prompt, {255, 2, 343}), whole), 1e-5);
  EXPECT_LT(relative_error(model.prefill(2, prompt, {300, 299, 1}), whole), 1e-5);
  EXPECT_LT(relative_error(model.prefill(3, prompt, {17, 512, 71}), whole), 1e-5);
}

TEST_F(InvarianceTest, LogitsDoNotDependOnTheRestOfTheStep) {
  ModelHarness model(dir_.path());
  const uint32_t vocab = model.info().vocab;
  const auto a = random_tokens(23, vocab, 2);
  const auto b = random_tokens(30, vocab, 3);
  const auto c = random_tokens(9, vocab, 4);

  // Alone.
  const std::vector<float> alone = model.prefill(0, a, {23});
  const std::vector<float> alone_decode = model.step({{0, {5}}}).at(0);

  // With a long prefill before it, a non-sampling chunk and a decoding request around it.
  model.prefill(10, c, {9});
  model.step({{11, std::vector<int32_t>(b.begin(), b.begin() + 10), false}});
  auto rows = model.step(
      {{11, std::vector<int32_t>(b.begin() + 10, b.end()), true}, {1, a, true}, {10, {7}, true}});
  EXPECT_LT(relative_error(rows.at(1), alone), 1e-5);
  // Decode of request 1 batched with 20 other tokens versus alone.
  rows = model.step({{12, random_tokens(20, vocab, 5), false}, {1, {5}, true}});
  EXPECT_LT(relative_error(rows.at(0), alone_decode), 1e-5);
}

// A slice that asks for all its logits (prompt log-probabilities) gets, for each position, the row
// a prefill ending there samples from; beside other slices in the step, and over a cached prefix.
TEST_F(InvarianceTest, EveryPositionsRowIsTheLastRowOfThePrefixEndingThere) {
  ModelHarness model(dir_.path());
  const uint32_t vocab = model.info().vocab;
  const auto prompt = random_tokens(21, vocab, 12);
  // Positions 0..8 first, without rows; then 9..20 with one each, between two other slices.
  model.step({{0, std::vector<int32_t>(prompt.begin(), prompt.begin() + 9), false}});
  const auto rows =
      model.step({{1, random_tokens(5, vocab, 13), true},
                  {0, std::vector<int32_t>(prompt.begin() + 9, prompt.end()), false, true},
                  {2, random_tokens(3, vocab, 14), false, true}});
  ASSERT_EQ(rows.size(), 1u + 12u + 3u);
  for (uint32_t end = 10; end <= 21; ++end) {
    const std::vector<int32_t> prefix(prompt.begin(), prompt.begin() + end);
    const std::vector<float> alone = model.prefill(100 + end, prefix, {end});
    EXPECT_LT(relative_error(rows.at(1 + end - 10), alone), 1e-5) << "position " << end - 1;
  }
}

TEST_F(InvarianceTest, DecodeAfterPrefillEqualsFullRecomputation) {
  ModelHarness model(dir_.path());
  const uint32_t vocab = model.info().vocab;
  const auto prompt = random_tokens(19, vocab, 6);
  std::vector<float> logits = model.prefill(0, prompt, {19});
  for (int step = 0; step < 6; ++step) {
    logits = model.step({{0, {argmax(logits)}}}).at(0);
    const std::vector<int32_t> history = model.history(0);
    const uint64_t fresh = 100 + step;
    const std::vector<float> recomputed =
        model.prefill(fresh, history, {static_cast<uint32_t>(history.size())});
    EXPECT_LT(relative_error(logits, recomputed), 1e-5) << "decode step " << step;
  }
}

TEST_F(InvarianceTest, ThreadCountDoesNotChangeTheResultBeyondRounding) {
  ModelHarness one(dir_.path(), ", threads = 1");
  ModelHarness two(dir_.path(), ", threads = 2");
  const auto prompt = random_tokens(37, one.info().vocab, 8);
  EXPECT_LT(relative_error(one.prefill(0, prompt, {37}), two.prefill(0, prompt, {37})), 1e-5);
}

// More threads than the machine's cores, and (in the CpuModelUnder* ctest entries) more than
// OpenMP grants: the model must compute with the team it gets, not leave GEMM shares undone.
TEST_F(InvarianceTest, MoreThreadsThanGrantedGiveTheResultOfOne) {
  ModelHarness one(dir_.path(), ", threads = 1");
  ModelHarness four(dir_.path(), ", threads = 4");
  const auto prompt = random_tokens(37, one.info().vocab, 9);
  EXPECT_LT(relative_error(one.prefill(0, prompt, {37}), four.prefill(0, prompt, {37})), 1e-5);
}

// mmap = false copies the weights into huge pages; the arithmetic is the same, so are the bits.
TEST_F(InvarianceTest, CopiedWeightsGiveExactlyTheLogitsOfMappedOnes) {
  ModelHarness mapped(dir_.path(), ", threads = 2");
  ModelHarness copied(dir_.path(), ", threads = 2, mmap = false");
  const auto prompt = random_tokens(29, mapped.info().vocab, 11);
  std::vector<float> a = mapped.prefill(0, prompt, {20, 9});
  std::vector<float> b = copied.prefill(0, prompt, {20, 9});
  EXPECT_EQ(a, b);
  for (int step = 0; step < 3; ++step) {
    a = mapped.step({{0, {argmax(a)}}}).at(0);
    b = copied.step({{0, {argmax(b)}}}).at(0);
    EXPECT_EQ(a, b) << "decode step " << step;
  }
}

TEST(CpuModelInfo, ReportsTheCheckpointAndTheContract) {
  TempDir dir("info");
  write_tiny_checkpoint(small_spec(), dir.path());
  ModelHarness model(dir.path(), ", kv_cache_gb = 0.01, max_model_len = 512");
  const hw_model_info& info = model.info();
  EXPECT_EQ(info.layers, 2u);
  EXPECT_EQ(info.hidden, 64u);
  EXPECT_EQ(info.heads, 4u);
  EXPECT_EQ(info.kv_heads, 2u);
  EXPECT_EQ(info.head_dim, 16u);
  EXPECT_EQ(info.vocab, 300u);
  EXPECT_EQ(info.max_model_len, 512u);
  EXPECT_EQ(info.eos_token, static_cast<uint32_t>(kTinyEosToken));
  EXPECT_EQ(info.kv_bytes_per_token, 2u * 2 * 2 * 16 * 4);
  EXPECT_EQ(info.kv_capacity_tokens, static_cast<uint64_t>(0.01e9 / info.kv_bytes_per_token));
  EXPECT_EQ(info.returns_logits, 1);
  EXPECT_EQ(info.needs_token_ids, 1);
  EXPECT_EQ(info.reports_duration, 0);
  const hw_memory_desc kv = model.model().kv_memory();
  EXPECT_EQ(kv.kind, HW_MEMORY_HOST);
  EXPECT_EQ(kv.block_bytes, info.kv_bytes_per_token * 4);
  EXPECT_EQ(kv.bytes, kv.block_bytes * 512);
}

// The KV cache is zeroed at once: one past the host's memory is refused before it is allocated,
// naming the option (8 TB here; it used to be left to the allocator or the out-of-memory killer).
TEST(CpuModelInfo, AKvCacheLargerThanTheHostHasIsRefusedNamingKvCacheGb) {
  TempDir dir("kv_too_big");
  write_tiny_checkpoint(small_spec(), dir.path());
  try {
    ModelHarness model(dir.path(), ", max_model_len = 64", /*block_size=*/4,
                       /*blocks=*/4'000'000'000u);
    FAIL() << "a KV cache of 8 TB was allocated";
  } catch (const core::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("kv_cache_gb"), std::string::npos) << message;
    EXPECT_NE(message.find("more than this host has available"), std::string::npos) << message;
    EXPECT_NE(message.find("8192.00 GB"), std::string::npos) << message;
  }
}

TEST(CpuModelForward, RejectsMalformedSlices) {
  TempDir dir("slices");
  write_tiny_checkpoint(small_spec(), dir.path());
  ModelHarness model(dir.path(), ", max_model_len = 64");
  EXPECT_THROW(model.step({{0, {1000}}}), core::Error);  // token id outside the vocabulary
  try {
    model.step({{1, random_tokens(65, 300, 1)}});
    FAIL() << "a slice beyond max_model_len was accepted";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_model_len"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headway::models::cpu::testing
