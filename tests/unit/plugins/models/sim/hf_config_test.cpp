// Reading a model's shape from a Hugging Face config.json: the keys transformers writes, their
// defaults, and one clear message naming the file and the key for every malformed input.
#include "hf_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <tuple>

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
  const ModelShape shape = parse_hf_config(kLlama31_8b, "config.json").shape;
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
  const ModelShape shape =
      parse_hf_config(
          R"({"num_hidden_layers": 2, "hidden_size": 1000, "num_attention_heads": 8,
          "head_dim": 256, "intermediate_size": 4000, "vocab_size": 5000,
          "tie_word_embeddings": true})",
          "c.json")
          .shape;
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

  // A number past a double's range is nlohmann's out_of_range, not a parse_error: it escaped
  // without the file (helper-151's fuzzer).
  e = expect_error(R"({"num_hidden_layers": 32, "rope_theta": 1e400})", "/models/x/config.json");
  EXPECT_NE(e.find("/models/x/config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("number overflow"), std::string::npos) << e;

  // A million levels parse, and copying the value overflowed the stack (helper-201's review).
  e = expect_error(R"({"num_hidden_layers": )" + std::string(1'000'000, '[') +
                   std::string(1'000'000, ']') + "}");
  EXPECT_NE(e.find("not valid JSON: objects and arrays nest more than 128 levels deep"),
            std::string::npos)
      << e;

  // A value past int64 was echoed as -1.
  e = expect_error(R"({"num_hidden_layers": 32, "hidden_size": 18446744073709551615})");
  EXPECT_NE(e.find("\"hidden_size\" must be in [1, 1048576] (got 18446744073709551615)"),
            std::string::npos)
      << e;
  // Shapes whose KV bytes per token wrapped around 64 bits were planned.
  e = expect_error(R"({"num_hidden_layers": 100000, "hidden_size": 4096})");
  EXPECT_NE(e.find("\"num_hidden_layers\" must be in [1, 4096]"), std::string::npos) << e;
  // Text after a NUL byte was ignored.
  e = expect_error(std::string(kLlama31_8b) + std::string(1, '\0') + "trailing");
  EXPECT_NE(e.find("NUL byte at offset"), std::string::npos) << e;
}

// What the memory model does not describe is refused by the key that shows it: each of these was
// planned as a dense Llama (helper-136's walk), off by 33% to 6x.
TEST(HfConfig, ModelsTheMemoryModelDoesNotDescribeAreRefused) {
  const std::string dense = R"("num_hidden_layers": 54, "hidden_size": 8192,
      "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
      "vocab_size": 103424)";
  // ERNIE 4.5 names its experts moe_num_experts (300B planned as 48B).
  std::string e = expect_error("{" + dense + R"(, "moe_num_experts": 64, "moe_k": 8})");
  EXPECT_NE(e.find("\"moe_num_experts\": mixture-of-experts"), std::string::npos) << e;
  e = expect_error("{" + dense + R"(, "num_experts_per_tok": 2})");
  EXPECT_NE(e.find("mixture-of-experts"), std::string::npos) << e;
  // MiniCPM3's multi-head latent attention without experts (KV 33% low).
  e = expect_error("{" + dense + R"(, "kv_lora_rank": 256, "q_lora_rank": 768})");
  EXPECT_NE(e.find("\"kv_lora_rank\": multi-head latent attention"), std::string::npos) << e;
  // StarCoder2's MLP is not gated (38% high).
  e = expect_error("{" + dense + R"(, "model_type": "starcoder2"})");
  EXPECT_NE(e.find("\"model_type\" is \"starcoder2\", not a family the planner describes"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("llama, mistral, qwen2, qwen3, phi3, gemma, gemma2"), std::string::npos) << e;
  // A multimodal config keeps its text model under text_config.
  e = expect_error(R"({"model_type": "gemma3", "text_config": {"num_hidden_layers": 62}})");
  EXPECT_NE(e.find("the model's shape is under \"text_config\""), std::string::npos) << e;
  // A null head_dim is no head_dim: hidden / heads must divide.
  e = expect_error("{" + dense.substr(0, dense.find("\"hidden_size\"")) +
                   R"("hidden_size": 8200, "num_attention_heads": 64, "intermediate_size": 1,
                      "vocab_size": 1, "head_dim": null})");
  EXPECT_NE(e.find("no key \"head_dim\", and hidden_size=8200"), std::string::npos) << e;
}

TEST(HfConfig, FamilyDefaultsRopeScalingAndNotes) {
  const std::string shape = R"("num_hidden_layers": 2, "hidden_size": 1024,
      "num_attention_heads": 8, "intermediate_size": 4096, "vocab_size": 5000)";
  // Gemma's configs leave tie_word_embeddings out: transformers ties them (counted twice before).
  EXPECT_TRUE(parse_hf_config("{" + shape + R"(, "model_type": "gemma2"})", "c.json")
                  .shape.tied_embeddings);
  EXPECT_FALSE(
      parse_hf_config("{" + shape + R"(, "model_type": "qwen2"})", "c.json").shape.tied_embeddings);
  // Qwen's YaRN at factor 4 over 32,768 serves 131,072 tokens, as vLLM derives it.
  const HfModel yarn = parse_hf_config(
      "{" + shape + R"(, "max_position_embeddings": 40960, "rope_scaling": {"rope_type": "yarn",
          "factor": 4.0, "original_max_position_embeddings": 32768}})",
      "c.json");
  EXPECT_EQ(yarn.shape.max_model_len, 131072u);
  EXPECT_NE(yarn.max_len_source.find("yarn, factor 4.0 over original_max_position_embeddings"),
            std::string::npos)
      << yarn.max_len_source;
  // Llama 3's own scaling does not raise max_position_embeddings.
  EXPECT_EQ(parse_hf_config(kLlama31_8b, "c.json").shape.max_model_len, 131072u);
  // A window that slides, and one a Qwen2 config names without using it.
  EXPECT_EQ(parse_hf_config("{" + shape + R"(, "sliding_window": 4096})", "c.json").sliding_window,
            4096u);
  EXPECT_EQ(
      parse_hf_config("{" + shape + R"(, "sliding_window": 131072, "use_sliding_window": false})",
                      "c.json")
          .sliding_window,
      0u);
  // Linear and dynamic scaling multiply max_position_embeddings, a factor below 1 shrinks it.
  for (const auto& [type, factor, expected] :
       {std::tuple{"linear", "4.0", 65536u}, std::tuple{"dynamic", "2", 32768u},
        std::tuple{"linear", "0.5", 8192u}}) {
    const HfModel scaled = parse_hf_config(
        "{" + shape + R"(, "max_position_embeddings": 16384, "rope_scaling": {"type": ")" + type +
            R"(", "factor": )" + factor + "}}",
        "c.json");
    EXPECT_EQ(scaled.shape.max_model_len, expected) << type << " " << factor;
  }
  // Gemma 3's text model is one of the families; transformers' integral floats are integers; a
  // window that is not a positive integer feeds no note and refuses nothing.
  const HfModel gemma3 = parse_hf_config(
      R"({"model_type": "gemma3_text", "num_hidden_layers": 26.0, "hidden_size": 1152,
          "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
          "intermediate_size": 6912, "vocab_size": 262144, "sliding_window": 0})",
      "c.json");
  EXPECT_EQ(gemma3.shape.layers, 26u);
  EXPECT_TRUE(gemma3.shape.tied_embeddings);
  EXPECT_EQ(gemma3.sliding_window, 0u);
  const HfModel awq = parse_hf_config(
      "{" + shape + R"(, "quantization_config": {"quant_method": "awq", "bits": 4}})", "c.json");
  ASSERT_EQ(awq.notes.size(), 1u);
  EXPECT_NE(awq.notes[0].find("quant_method \"awq\", 4-bit) is not read"), std::string::npos)
      << awq.notes[0];
}

TEST(HfConfig, LoadsFromAFileAndNamesAMissingOne) {
  const fs::path dir = fs::temp_directory_path() / ("hf_config_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "config.json";
  std::ofstream(file) << kLlama31_8b;
  EXPECT_EQ(load_hf_config(file).shape.layers, 32u);
  fs::remove_all(dir);
  try {
    load_hf_config(file);
    FAIL() << "a missing file was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot open the file: No such file"), std::string::npos)
        << e.what();
  }
}

TEST(HfConfig, OnlyARegularFileOfAFewMegabytesIsRead) {
  // /dev/zero was read until memory ran out, a FIFO waited for ever, 5 GB took 48 s and 11 GB.
  for (const char* device : {"/dev/zero", "/dev/null"}) {
    try {
      load_hf_config(device);
      ADD_FAILURE() << device << " was read";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("hf_config_big_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path big = dir / "config.json";
  std::ofstream(big) << kLlama31_8b;
  fs::resize_file(big, kMaxConfigBytes + 1);  // sparse: nothing written
  try {
    load_hf_config(big);
    ADD_FAILURE() << "a file of " << kMaxConfigBytes + 1 << " bytes was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("holds 16777217 bytes"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace headway::models::sim
