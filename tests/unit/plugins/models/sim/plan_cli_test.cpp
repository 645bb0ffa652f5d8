// `headway plan` as a user runs it: the chosen degree, the memory breakdown, one line per smaller
// degree saying why it fails, and one clear stderr line for every bad invocation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../../../../integration/cli_runner.h"

namespace {

namespace fs = std::filesystem;
using headway::test::CliRun;

CliRun run(const std::string& args) { return headway::test::run_cli("plan " + args); }

size_t lines(const std::string& s) {
  size_t count = 0;
  for (char c : s) count += c == '\n';
  return count;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A config.json in a fresh temporary directory, removed with the object.
struct TempConfig {
  explicit TempConfig(const std::string& json)
      : dir(fs::temp_directory_path() / ("plan_cli_test_" + std::to_string(::getpid()))) {
    fs::create_directories(dir);
    std::ofstream(path()) << json;
  }
  ~TempConfig() { fs::remove_all(dir); }
  fs::path path() const { return dir / "config.json"; }
  fs::path dir;
};

TEST(PlanCli, Llama70bOnH100At64kNeedsFourGpus) {
  const CliRun r = run("--model llama-3.3-70b --gpu h100 --context 65536");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "tensor_parallel = 4")) << r.out;
  EXPECT_TRUE(contains(r.out, "weights              35.28")) << r.out;
  EXPECT_TRUE(
      contains(r.out, "KV cache              5.37   (1 x 65536 tokens x 81920 bytes/token)"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "max concurrency at context 65536: 6")) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "on h100 (80.00 GB per GPU, 72.00 usable at gpu_memory_utilization "
                       "0.90)"))
      << r.out;
  // The smaller degrees, each with the size of its miss (hand-computed in planner_test.cpp).
  EXPECT_TRUE(contains(r.out, "tp=1: memory: needs ")) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "tp=2: memory: needs 84.88 GB per GPU, 12.88 GB more than the 72.00 GB it "
                       "may use"))
      << r.out;
  EXPECT_FALSE(contains(r.out, "tp=8")) << r.out;
}

// The preset counts an H100's marketed 80 GB; vLLM takes 0.9 of what CUDA reports, which is more.
// Given that figure, two H100s hold Llama-3.3-70B bf16 at 4k (74.81 GB per GPU, 76.50 usable at
// 85 GB), as vLLM would load it with --max-model-len 4096 (helper-165).
TEST(PlanCli, TheGpusReportedMemoryReplacesThePresets) {
  const CliRun preset = run("--model llama-3.3-70b --gpu h100 --context 4k");
  ASSERT_EQ(preset.exit_code, 0) << preset.err;
  EXPECT_TRUE(contains(preset.out, "tensor_parallel = 4")) << preset.out;
  const CliRun reported = run("--model llama-3.3-70b --gpu h100 --context 4k --gpu-memory-gb 85");
  ASSERT_EQ(reported.exit_code, 0) << reported.err;
  EXPECT_TRUE(contains(reported.out, "tensor_parallel = 2")) << reported.out;
  EXPECT_TRUE(contains(reported.out,
                       "on h100 (85.00 GB per GPU, 76.50 usable at gpu_memory_utilization 0.90)"))
      << reported.out;
  const CliRun zero = run("--model llama-3.3-70b --gpu h100 --context 4k --gpu-memory-gb 0.5");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_TRUE(contains(zero.err, "--gpu-memory-gb")) << zero.err;
}

TEST(PlanCli, Fp8AndH200ChangeTheAnswer) {
  CliRun r = run("--model llama-3.3-70b --gpu h200 --context 65536");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "tensor_parallel = 2")) << r.out;
  r = run("--model llama-3.3-70b --gpu h100 --context 8192 --dtype fp8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "tensor_parallel = 2")) << r.out;
  EXPECT_TRUE(contains(r.out, "weights fp8, KV cache fp8")) << r.out;
  // 70B's bf16 weights need four H100s at the default 0.9, two when the process may use 0.95.
  r = run("--model llama-3.3-70b --gpu h100 --context 4096");
  EXPECT_TRUE(contains(r.out, "tensor_parallel = 4")) << r.out;
  r = run("--model llama-3.3-70b --gpu h100 --context 4096 --gpu-memory-utilization 0.95");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "tensor_parallel = 2")) << r.out;
  EXPECT_TRUE(contains(r.out, "of 76.00 usable")) << r.out;
  r = run("--model llama-3.3-70b --gpu h100 --context 8192 --dtype fp8 --kv-dtype bf16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "weights fp8, KV cache bf16")) << r.out;
}

TEST(PlanCli, HeadDivisibilityIsAReasonForAConfigJson) {
  // Qwen2.5-7B-like: 28 query heads and 4 kv heads, made so deep (800 layers) that even four GPUs
  // are too few.
  const TempConfig config(R"({"num_hidden_layers": 800, "hidden_size": 3584,
      "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
      "vocab_size": 152064, "max_position_embeddings": 32768})");
  const CliRun r = run("--model " + config.path().string() + " --gpu h100 --context 4096");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "tp=8: heads: heads=28 % tp=8 = 4")) << r.out;
  EXPECT_TRUE(contains(r.out, "tp=4: memory: needs")) << r.out;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "does not fit")) << r.err;
}

TEST(PlanCli, BadInputsAreOneClearLine) {
  CliRun r = run("--model llama-9b --gpu h100 --context 4096");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "--model: unknown model preset 'llama-9b'")) << r.err;

  const TempConfig bad(R"({"num_hidden_layers": 32, "hidden_size": "big"})");
  r = run("--model " + bad.path().string() + " --gpu h100 --context 4096");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, bad.path().string())) << r.err;
  EXPECT_TRUE(contains(r.err, "\"hidden_size\"")) << r.err;

  r = run("--model /nonexistent/config.json --gpu h100 --context 4096");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "/nonexistent/config.json: cannot open")) << r.err;

  r = run("--model llama-2-70b --gpu h100 --context 8192");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--context 8192 exceeds the model's maximum of 4096")) << r.err;

  r = run("--model llama-3.1-8b --gpu a100 --context 4096");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "a100")) << r.err;

  r = run("--model llama-3.1-8b --gpu h100");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "--context")) << r.err;

  // Text that is not a number is said to be none, as simulate's --rate-scale says it, not "not
  // in range 0.05 to 1" as if it were one (the operator's walkthrough).
  for (const char* flag : {"--gpu-memory-utilization 0.9x", "--gpu-memory-gb 80GB"}) {
    r = run(std::string("--model llama-3.1-8b --gpu h100 --context 4096 ") + flag);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_TRUE(contains(r.err, "expected a number, got '")) << r.err;
    EXPECT_FALSE(contains(r.err, "not in range")) << r.err;
  }
  r = run("--model llama-3.1-8b --gpu h100 --context 4096 --gpu-memory-gb 0.5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "not in range")) << r.err;

  for (const char* context : {"8q", "k", "-8k", "8.5k"}) {
    r = run(std::string("--model llama-3.1-8b --gpu h100 --context ") + context);
    EXPECT_NE(r.exit_code, 0) << context;
    EXPECT_TRUE(contains(r.err, "expected a number of tokens such as 4096 or 8k")) << r.err;
  }
}

// What the plan does not count is said on a note: line, and contradictory flags are refused.
TEST(PlanCli, NotesSayWhatThePlanDoesNotCount) {
  // Mistral-7B-v0.1: a 4,096-token window, counted as full attention at 32k.
  const TempConfig mistral(R"({"model_type": "mistral", "num_hidden_layers": 32,
      "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
      "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768,
      "sliding_window": 4096})");
  CliRun r = run("--model " + mistral.path().string() + " --gpu h100 --context 32k");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out,
                       "note: sliding_window = 4096: the KV cache is counted for full "
                       "attention"))
      << r.out;
  // At a context inside the window there is nothing to say.
  r = run("--model " + mistral.path().string() + " --gpu h100 --context 4k");
  EXPECT_FALSE(contains(r.out, "note:")) << r.out;

  r = run("--model llama-3.1-8b --gpu h100 --context 4k --dtype fp8 --concurrency 512");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "note: KV cache fp8 because --kv-dtype auto follows --dtype"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "note: --concurrency 512 is above --max-num-seqs 256")) << r.out;

  r = run("--model llama-3.1-8b --gpu h100 --context 4k --gpu-memory-utilization nan");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--gpu-memory-utilization: must be greater than 0, got nan"))
      << r.err;
  r = run("--model llama-3.1-8b --gpu h100 --context 4k --max-num-batched-tokens 16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--max-num-batched-tokens 16 is below --max-num-seqs 256")) << r.err;
}

// Context lengths as they are spoken of: 8k is 8,192 tokens, 128K 131,072.
TEST(PlanCli, ContextTakesAKSuffix) {
  CliRun r = run("--model llama-3.3-70b --gpu h100 --context 64k");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "max concurrency at context 65536: 6")) << r.out;
  r = run("--model llama-3.1-8b --gpu h200 --context 128K");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "context 131072 tokens")) << r.out;
  r = run("--model llama-3.1-8b --gpu h200 --context 129k");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--context 132096 exceeds the model's maximum of 131072")) << r.err;
}

}  // namespace
