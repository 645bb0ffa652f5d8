// A LocalGenerationService over the CPU reference model with a tiny random-weight checkpoint
// (2 layers, byte-level tokenizer), written to a per-process temp directory; helpers to read a
// stream to its end. Threading: one fixture per test.
#pragma once

#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/serving/local_generation_service.h>
#include <tiny_checkpoint.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../../test_support/built_plugins.h"
#include "../../test_support/tiny_checkpoint_dir.h"

namespace headway::serving::test {

namespace fs = std::filesystem;

using headway::test::shared_tiny_checkpoint;
using headway::test::TinyCheckpoint;

// `engines_toml`: the [[engines]] tables; the model is the tiny checkpoint on 1 thread.
inline core::DeploymentConfig tiny_deployment(const TinyCheckpoint& checkpoint,
                                              const std::string& engines_toml,
                                              const std::string& extra_toml = "",
                                              uint32_t max_model_len = 1024) {
  const std::string text =
      "name = \"svc-test\"\n[model]\nplugin = \"cpu\"\noptions = { path = \"tiny\", threads = 1, "
      "kv_cache_gb = 0.02, max_model_len = " +
      std::to_string(max_model_len) + " }\n" + engines_toml + extra_toml;
  return core::parse_deployment(text, checkpoint.path / "deploy.toml",
                                headway::test::built_plugins());
}

struct Collected {
  std::vector<int32_t> ids;
  std::string text;
  Finish finish = Finish::kNone;
  StopReason stop_reason;
  std::string error;
  Usage usage;
  Timings timings;
  std::optional<KvStage> kv_stage;              // kHandoff (prefill_only): where the KV waits
  std::vector<GeneratedLogprobs> logprobs;      // when the request asked for them
  std::vector<PromptLogprobs> prompt_logprobs;  // when the request asked for them
};

// Reads a stream until its finishing chunk. The bound only keeps a broken service from hanging
// the test run forever; no assertion depends on how long anything takes.
inline Collected collect(RequestStream& stream) {
  Collected c;
  StreamChunk chunk;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (c.finish == Finish::kNone && std::chrono::steady_clock::now() < give_up) {
    if (!stream.next(chunk, std::chrono::milliseconds(100))) continue;
    c.ids.insert(c.ids.end(), chunk.token_ids.begin(), chunk.token_ids.end());
    c.logprobs.insert(c.logprobs.end(), chunk.logprobs.begin(), chunk.logprobs.end());
    c.prompt_logprobs.insert(c.prompt_logprobs.end(), chunk.prompt_logprobs.begin(),
                             chunk.prompt_logprobs.end());
    c.text += chunk.text;
    if (chunk.finish != Finish::kNone) {
      c.finish = chunk.finish;
      c.stop_reason = chunk.stop_reason;
      c.error = chunk.error;
      c.usage = chunk.usage;
      c.timings = chunk.timings;
      c.kv_stage = chunk.kv_stage;
    }
  }
  return c;
}

// Engines with a chunked scheduler of 64-token steps: one mixed engine, or a prefill and a decode
// engine with the disaggregated router and host_copy between them (tiny_deployment's extra).
inline const std::string kSmallStepScheduler =
    "scheduler = { plugin = \"chunked\", options = { max_num_batched_tokens = 64, "
    "max_num_seqs = 16 } }\n";
inline const std::string kMixedEngine = "[[engines]]\n" + kSmallStepScheduler;
inline const std::string kPrefillAndDecodeEngines =
    "[[engines]]\nrole = \"prefill\"\n" + kSmallStepScheduler + "[[engines]]\nrole = \"decode\"\n" +
    kSmallStepScheduler;
inline const std::string kDisaggregatedRouter =
    "[router]\nplugin = \"disaggregated\"\n[kv_transport]\nplugin = \"host_copy\"\n";

inline GenerateInput text_request(std::string prompt, uint32_t max_tokens) {
  GenerateInput input;
  input.prompt_kind = GenerateInput::PromptKind::kText;
  input.prompt_text = std::move(prompt);
  input.max_tokens = max_tokens;
  input.sampling.ignore_eos = true;  // random weights: run to max_tokens
  return input;
}

// Sum of every sample of `metric` (exact name, any labels) in exposition `text` whose labels
// contain `filter`.
inline double sum_of(const std::string& text, const std::string& metric,
                     const std::string& filter = "") {
  double sum = 0.0;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (line.substr(0, name_end) != metric) continue;
    if (!filter.empty() && line.find(filter) == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// Waits until the service has forgotten every request (drivers publish loads before forgetting).
inline void wait_idle(const LocalGenerationService& service) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (service.in_flight() > 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Submits `prompt` with prefill_only (as a router does to a prefill engine process) and reads the
// stream to its end (kHandoff: kv_stage says where its KV waits).
inline Collected prefill_only(GenerationService& service, const std::string& prompt,
                              uint32_t max_tokens) {
  GenerateInput input = text_request(prompt, max_tokens);
  input.prefill_only = true;
  return collect(*service.submit(input));
}

// Prompts for the disaggregation tests: from a few tokens to several KV blocks (block size 16)
// and several prefill chunks.
inline std::vector<std::string> handoff_prompts() {
  return {"Hi", "The quick brown fox jumps over the lazy dog.", std::string(150, 'q'),
          std::string(333, 'z') + " tail"};
}

}  // namespace headway::serving::test
