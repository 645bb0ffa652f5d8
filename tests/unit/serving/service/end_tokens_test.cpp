// How a request ends and what its text shows of special tokens: the checkpoint's end tokens
// (generation_config.json and config.json's eos_token_id, the tokenizer's eos_token) end a request
// as vLLM's do, and skip_special_tokens: false writes special tokens into the text, but never the
// end token a request stops on.
#include "end_tokens.h"

#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/serving/local_generation_service.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "service_fixture.h"
#include "tiny_bpe.h"

namespace headway::serving {
namespace {

namespace fs = std::filesystem;
using test::collect;
using test::text_request;
using test::tiny_deployment;

const std::string kOneEngine =
    "[[engines]]\nscheduler = { plugin = \"chunked\", options = { max_num_batched_tokens = 256, "
    "max_num_seqs = 16 } }\n";

// A directory of its own under the temp directory, removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

std::string end_tokens_error(const fs::path& dir) {
  try {
    checkpoint_end_tokens(dir, -1, 300);
  } catch (const core::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CheckpointEndTokens, ReadsBothFilesAndTheTokenizersEos) {
  ScratchDir dir("headway_end_tokens");
  EXPECT_EQ(checkpoint_end_tokens(dir.path(), -1, 300), std::vector<int32_t>{});
  EXPECT_EQ(checkpoint_end_tokens(dir.path(), 7, 300), std::vector<int32_t>{7});
  // Llama 3.1 Instruct's shape: a list in both files, the tokenizer's eos among them.
  write(dir.path() / "config.json", R"({"eos_token_id": [128, 9, 10], "hidden_size": 8})");
  write(dir.path() / "generation_config.json", R"({"eos_token_id": [12, 128], "top_p": 0.9})");
  EXPECT_EQ(checkpoint_end_tokens(dir.path(), 10, 300), (std::vector<int32_t>{9, 10, 12, 128}));
  write(dir.path() / "generation_config.json", R"({"eos_token_id": 3})");
  write(dir.path() / "config.json", R"({"eos_token_id": null})");
  EXPECT_EQ(checkpoint_end_tokens(dir.path(), -1, 300), std::vector<int32_t>{3});
}

TEST(CheckpointEndTokens, RefusesWhatIsNotTokenIdsNamingTheFileAndField) {
  ScratchDir dir("headway_end_tokens_bad");
  write(dir.path() / "generation_config.json", "{not json");
  EXPECT_NE(end_tokens_error(dir.path()).find("generation_config.json: invalid JSON"),
            std::string::npos)
      << end_tokens_error(dir.path());
  write(dir.path() / "generation_config.json", R"({"eos_token_id": "</s>"})");
  EXPECT_NE(end_tokens_error(dir.path())
                .find("generation_config.json: field 'eos_token_id' must be a token id"),
            std::string::npos)
      << end_tokens_error(dir.path());
  write(dir.path() / "generation_config.json", R"({"eos_token_id": [1, 300]})");
  EXPECT_NE(end_tokens_error(dir.path()).find("names token 300, outside the vocabulary of 300"),
            std::string::npos)
      << end_tokens_error(dir.path());
  // Past int64 it was named "token -1" (helper-201's review): named as written.
  write(dir.path() / "generation_config.json", R"({"eos_token_id": 18446744073709551615})");
  EXPECT_NE(end_tokens_error(dir.path())
                .find("names token 18446744073709551615, outside the vocabulary of 300"),
            std::string::npos)
      << end_tokens_error(dir.path());
}

// A token the checkpoint lists as an end token ends the request there (finish "stop", the token
// its stop_reason, as vLLM reports a generation_config end token), without its text; ignore_eos
// runs past it.
TEST(EndTokens, AGenerationConfigEndTokenEndsTheRequest) {
  ScratchDir dir("headway_end_tokens_service");
  models::cpu::TinyModelSpec spec = headway::test::tiny_test_spec();
  spec.max_position_embeddings = 4096;
  models::cpu::write_tiny_checkpoint(spec, dir.path() / "tiny");
  const auto deployment = [&] {
    return core::parse_deployment(
        "name = \"end-tokens\"\n[model]\nplugin = \"cpu\"\noptions = { path = \"tiny\", threads = "
        "1, kv_cache_gb = 0.02, max_model_len = 1024 }\n" +
            kOneEngine,
        dir.path() / "deploy.toml", headway::test::built_plugins());
  };
  GenerateInput input = text_request("end tokens", 24);
  input.sampling.temperature = 0.0f;
  input.sampling.ignore_eos = false;
  std::vector<int32_t> free_ids;
  {
    LocalGenerationService service(deployment());
    free_ids = collect(*service.submit(input)).ids;
  }
  ASSERT_EQ(free_ids.size(), 24u) << "the free run ended early";
  // The first byte that did not come before: the request must end right on it.
  size_t at = 1;
  while (at < free_ids.size() &&
         (free_ids[at] >= 256 || std::find(free_ids.begin(), free_ids.begin() + at, free_ids[at]) !=
                                     free_ids.begin() + at)) {
    ++at;
  }
  ASSERT_LT(at, free_ids.size()) << "no new byte in the free run";
  const int32_t end = free_ids[at];
  write(dir.path() / "tiny" / "generation_config.json",
        "{\"eos_token_id\": [" + std::to_string(models::cpu::kTinyEosToken) + ", " +
            std::to_string(end) + "]}");
  LocalGenerationService service(deployment());
  const test::Collected ended = collect(*service.submit(input));
  EXPECT_EQ(ended.finish, Finish::kStop) << ended.error;
  EXPECT_EQ(ended.ids, std::vector<int32_t>(free_ids.begin(), free_ids.begin() + at + 1));
  EXPECT_EQ(ended.stop_reason, StopReason(end));
  std::string before;
  for (size_t i = 0; i < at; ++i) before += static_cast<char>(free_ids[i]);
  EXPECT_EQ(ended.text, before);
  GenerateInput ignoring = input;
  ignoring.sampling.ignore_eos = true;
  EXPECT_EQ(collect(*service.submit(ignoring)).ids, free_ids);
}

// Llama 3.1 Instruct's shape: the tokenizer's eos_token (here <pad>) is not the model plugin's
// (config.json's first id, </s>). Both end a request; only the plugin's is a stop_reason, as vLLM
// reports the ids of generation_config.json other than the tokenizer's EOS; neither gives text.
TEST(EndTokens, TheTokenizersEosEndsARequestWithoutAStopReason) {
  ScratchDir dir("headway_end_tokens_eos");
  models::cpu::TinyModelSpec spec = headway::test::tiny_test_spec();
  spec.max_position_embeddings = 4096;
  models::cpu::write_tiny_checkpoint(spec, dir.path() / "tiny");
  const fs::path tokenizer_file = dir.path() / "tiny" / "tokenizer.json";
  nlohmann::json tokenizer = nlohmann::json::parse(std::ifstream(tokenizer_file));
  tokenizer["eos_token"] = "<pad>";
  write(tokenizer_file, tokenizer.dump());
  LocalGenerationService service(core::parse_deployment(
      "name = \"eos\"\n[model]\nplugin = \"cpu\"\noptions = { path = \"tiny\", threads = 1, "
      "kv_cache_gb = 0.02, max_model_len = 1024 }\n" +
          kOneEngine,
      dir.path() / "deploy.toml", headway::test::built_plugins()));
  for (const int32_t end : {models::cpu::kTinyEosToken, models::cpu::kTinyPadToken}) {
    GenerateInput input = text_request("eos", 4);
    input.sampling.temperature = 0.0f;
    input.sampling.ignore_eos = false;
    input.sampling.logit_bias = {{end, 100.0f}};
    input.skip_special_tokens = false;
    const test::Collected ended = collect(*service.submit(input));
    EXPECT_EQ(ended.ids, std::vector<int32_t>{end}) << end;
    EXPECT_EQ(ended.finish, Finish::kStop) << end;
    EXPECT_EQ(ended.text, "") << end;
    EXPECT_EQ(ended.stop_reason, end == models::cpu::kTinyPadToken ? StopReason() : StopReason(end))
        << end;
  }
}

// A SentencePiece-style tokenizer (Llama 2's tokenizer.json) drops the space that begins the text
// it decodes; the service primes each stream's decoder with the prompt, so the first output keeps
// the space it adds after the prompt: "▁Hi" after "Hi" is " Hi", in the stream and in the text.
TEST(SentencePieceText, TheFirstOutputKeepsTheSpaceItAddsAfterThePrompt) {
  ScratchDir dir("headway_sentencepiece_text");
  models::cpu::write_tiny_checkpoint(headway::test::tiny_test_spec(), dir.path() / "tiny");
  write(dir.path() / "tiny" / "tokenizer.json",
        serving::testing::tiny_sentencepiece_bpe_json().dump());
  write(dir.path() / "tiny" / "tokenizer_config.json",
        R"({"bos_token": "<s>", "eos_token": "</s>"})");
  LocalGenerationService service(core::parse_deployment(
      "name = \"sp\"\n[model]\nplugin = \"cpu\"\noptions = { path = \"tiny\", threads = 1, "
      "kv_cache_gb = 0.02 }\n" +
          kOneEngine,
      dir.path() / "deploy.toml", headway::test::built_plugins()));
  const int32_t hi = 266;  // "▁Hi"
  GenerateInput input = text_request("Hi", 2);
  input.sampling.temperature = 0.0f;
  input.sampling.logit_bias = {{hi, 100.0f}};
  const test::Collected out = collect(*service.submit(input));
  EXPECT_EQ(out.ids, (std::vector<int32_t>{hi, hi}));
  EXPECT_EQ(out.text, " Hi Hi");
}

// skip_special_tokens: false writes the tiny tokenizer's <pad> as "<pad>"; the EOS a request
// ends on gives no text, and no stop_reason, either way.
TEST(SpecialTokens, AreWrittenWhenKeptExceptTheEndOfSequence) {
  LocalGenerationService service(tiny_deployment(test::shared_tiny_checkpoint(), kOneEngine));
  GenerateInput pads = text_request("pads", 3);
  pads.sampling.temperature = 0.0f;
  pads.sampling.logit_bias = {{models::cpu::kTinyPadToken, 100.0f}};
  const test::Collected skipped = collect(*service.submit(pads));
  EXPECT_EQ(skipped.ids, std::vector<int32_t>(3, models::cpu::kTinyPadToken));
  EXPECT_EQ(skipped.text, "");
  pads.skip_special_tokens = false;
  EXPECT_EQ(collect(*service.submit(pads)).text, "<pad><pad><pad>");

  GenerateInput eos = text_request("eos", 3);
  eos.sampling.temperature = 0.0f;
  eos.sampling.ignore_eos = false;
  eos.sampling.logit_bias = {{models::cpu::kTinyEosToken, 100.0f}};
  eos.skip_special_tokens = false;
  const test::Collected ended = collect(*service.submit(eos));
  EXPECT_EQ(ended.ids, std::vector<int32_t>{models::cpu::kTinyEosToken});
  EXPECT_EQ(ended.finish, Finish::kStop);
  EXPECT_EQ(ended.text, "");
  EXPECT_EQ(ended.stop_reason, StopReason());
}

}  // namespace
}  // namespace headway::serving
