// Reading a model's shape from a Hugging Face config.json: the keys transformers writes, their
// defaults, and one clear message naming the file and the key for every malformed input.
#include "hf_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "presets.h"

namespace headway::models::sim {
namespace {

namespace fs = std::filesystem;

// meta-llama/Llama-3.1-8B-Instruct's config.json, abridged to the keys that matter and a few that
// do not (the reader ignores them).
constexpr const char* kLlama31_8b = R"({
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 128256
})";

std::string expect_error(const std::string& json, const std::string& name = "config.json") {
  try {
    parse_hf_config(json, name);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << json;
  return "";
}

TEST(HfConfig, Llama31_8bMatchesThePreset) {
  const ModelShape shape = parse_hf_config(kLlama31_8b, "config.json");
  const ModelShape& preset = find_model_preset("llama-3.1-8b")->shape;
  EXPECT_EQ(shape.layers, preset.layers);
  EXPECT_EQ(shape.hidden, preset.hidden);
  EXPECT_EQ(shape.heads, preset.heads);
  EXPECT_EQ(shape.kv_heads, preset.kv_heads);
  EXPECT_EQ(shape.head_dim, preset.head_dim);  // 4096 / 32, no head_dim key
  EXPECT_EQ(shape.intermediate, preset.intermediate);
  EXPECT_EQ(shape.vocab, preset.vocab);
  EXPECT_EQ(shape.max_model_len, preset.max_model_len);
  EXPECT_FALSE(shape.tied_embeddings);
}

TEST(HfConfig, DefaultsAndExplicitHeadDim) {
  // No num_key_value_heads: plain multi-head attention. An explicit head_dim wins over
  // hidden / heads (Gemma- and Qwen3-style configs set it).
  const ModelShape shape = parse_hf_config(
      R"({"num_hidden_layers": 2, "hidden_size": 1000, "num_attention_heads": 8,
          "head_dim": 256, "intermediate_size": 4000, "vocab_size": 5000,
          "tie_word_embeddings": true})",
      "c.json");
  EXPECT_EQ(shape.kv_heads, 8u);
  EXPECT_EQ(shape.head_dim, 256u);
  EXPECT_EQ(shape.max_model_len, 0u);
  EXPECT_TRUE(shape.tied_embeddings);
  // Tied: one vocab x hidden matrix in memory, not two.
  const ParameterCounts counts = parameter_counts(shape);
  EXPECT_EQ(counts.embedding, 0.0);
  EXPECT_EQ(counts.lm_head, 1000.0 * 5000);
}

TEST(HfConfig, ErrorsNameTheFileAndTheKey) {
  std::string e = expect_error(R"({"hidden_size": 4096})", "/models/x/config.json");
  EXPECT_NE(e.find("/models/x/config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("\"num_hidden_layers\""), std::string::npos) << e;

  e = expect_error(R"({"num_hidden_layers": "32", "hidden_size": 4096})");
  EXPECT_NE(e.find("\"num_hidden_layers\" must be an integer"), std::string::npos) << e;

  e = expect_error(R"({"num_hidden_layers": 32, "hidden_size": -1})");
  EXPECT_NE(e.find("\"hidden_size\" must be in [1,"), std::string::npos) << e;

  e = expect_error(R"({"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                       "intermediate_size": 1, "vocab_size": 1, "num_key_value_heads": 5})");
  EXPECT_NE(e.find("\"num_key_value_heads\"=5 must divide num_attention_heads=32"),
            std::string::npos)
      << e;

  e = expect_error(R"({"num_hidden_layers": 32, "hidden_size": 4000, "num_attention_heads": 48,
                       "intermediate_size": 1, "vocab_size": 1})");
  EXPECT_NE(e.find("head_dim"), std::string::npos) << e;

  e = expect_error(R"({"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                       "intermediate_size": 1, "vocab_size": 1, "tie_word_embeddings": "no"})");
  EXPECT_NE(e.find("\"tie_word_embeddings\" must be true or false"), std::string::npos) << e;

  e = expect_error(R"({"num_hidden_layers": 32, "num_local_experts": 8})");
  EXPECT_NE(e.find("\"num_local_experts\": mixture-of-experts"), std::string::npos) << e;

  e = expect_error(R"({"num_hidden_layers": 32,)");
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;

  e = expect_error(R"([1, 2])");
  EXPECT_NE(e.find("JSON object"), std::string::npos) << e;
}

TEST(HfConfig, LoadsFromAFileAndNamesAMissingOne) {
  const fs::path dir = fs::temp_directory_path() / ("hf_config_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "config.json";
  std::ofstream(file) << kLlama31_8b;
  EXPECT_EQ(load_hf_config(file).layers, 32u);
  fs::remove_all(dir);
  try {
    load_hf_config(file);
    FAIL() << "a missing file was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headway::models::sim
