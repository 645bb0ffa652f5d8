// Loading checkpoints: every malformed input is an error that names the file and the tensor (or the
// key), never a crash. Most cases go through the plugin's C ABI (create), as the engine does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <headway/sdk/status.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_model_harness.h"
#include "llama_config.h"
#include "safetensors.h"
#include "safetensors_writer.h"
#include "tiny_checkpoint.h"

namespace headway::models::cpu::testing {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A valid checkpoint's header (as JSON) and data section, to be edited into malformed files.
struct RawFile {
  json header;
  std::string data;

  static RawFile read(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    return RawFile{json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
  }
  void write(const std::filesystem::path& path, const std::string* raw_header = nullptr) const {
    const std::string text = raw_header ? *raw_header : header.dump();
    const uint64_t n = text.size();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text << data;
  }
};

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tiny_checkpoint(small_spec(), dir_.path());
    raw_ = RawFile::read(file());
  }
  std::filesystem::path file() const { return dir_.path() / "model.safetensors"; }
  std::filesystem::path config_file() const { return dir_.path() / "config.json"; }
  void edit_config(const std::function<void(json&)>& edit) {
    std::ifstream in(config_file());
    json config = json::parse(in);
    edit(config);
    std::ofstream(config_file(), std::ios::trunc) << config.dump();
  }

  // The message of the error creating the model, through the plugin ABI.
  std::string create_error() {
    try {
      ModelHarness model(dir_.path());
    } catch (const core::Error& e) {
      EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "the malformed checkpoint was accepted";
    return "";
  }

  TempDir dir_{"loader"};
  RawFile raw_;
};

const char* const kTensor = "model.layers.1.self_attn.k_proj.weight";

std::string config_error(const std::string& text);

TEST_F(LoaderTest, ValidCheckpointLoads) { EXPECT_NO_THROW(ModelHarness model(dir_.path())); }

TEST_F(LoaderTest, MissingTensor) {
  raw_.header.erase(kTensor);
  raw_.write(file());
  EXPECT_THAT(create_error(),
              AllOf(HasSubstr(file().string()), HasSubstr(kTensor), HasSubstr("not found")));
}

TEST_F(LoaderTest, WrongShape) {
  // Same byte size, transposed shape: only the shape check can catch it.
  raw_.header[kTensor]["shape"] = {64, 32};
  raw_.write(file());
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string()), HasSubstr(kTensor),
                                    HasSubstr("shape [64, 32], expected [32, 64]")));
}

TEST_F(LoaderTest, TruncatedData) {
  // Cut the file inside the last tensor: it must be named, not read past the end.
  std::string last;
  uint64_t last_end = 0;
  for (auto& [name, entry] : raw_.header.items()) {
    if (name != "__metadata__" && entry["data_offsets"][1].get<uint64_t>() > last_end) {
      last_end = entry["data_offsets"][1].get<uint64_t>();
      last = name;
    }
  }
  raw_.data.resize(last_end - 10);
  raw_.write(file());
  EXPECT_THAT(create_error(),
              AllOf(HasSubstr(file().string()), HasSubstr(last), HasSubstr("truncated")));
}

TEST_F(LoaderTest, TruncatedHeader) {
  std::ofstream(file(), std::ios::binary | std::ios::trunc) << std::string("\x40\x00\x00", 3);
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string()), HasSubstr("truncated")));
  const std::string header = raw_.header.dump();
  raw_.data.clear();
  raw_.write(file(), &header);
  std::filesystem::resize_file(file(), 8 + header.size() / 2);
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string()), HasSubstr("truncated")));
}

TEST_F(LoaderTest, OffsetsBeyondTheFile) {
  const uint64_t size = raw_.data.size();
  raw_.header[kTensor]["data_offsets"] = {size + 1000, size + 1000 + 32 * 64 * 4};
  raw_.write(file());
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string()), HasSubstr(kTensor),
                                    HasSubstr("beyond the data section")));
}

TEST_F(LoaderTest, OverlappingTensors) {
  const json other = raw_.header["model.layers.1.self_attn.q_proj.weight"]["data_offsets"];
  const uint64_t begin = other[0].get<uint64_t>() + 64;
  raw_.header[kTensor]["data_offsets"] = {begin, begin + 32 * 64 * 4};
  raw_.write(file());
  EXPECT_THAT(create_error(),
              AllOf(HasSubstr(file().string()), HasSubstr(kTensor),
                    HasSubstr("model.layers.1.self_attn.q_proj.weight"), HasSubstr("overlap")));
}

TEST_F(LoaderTest, DtypeSizeMismatch) {
  raw_.header[kTensor]["dtype"] = "F16";  // half the bytes the offsets span
  raw_.write(file());
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string()), HasSubstr(kTensor),
                                    HasSubstr("need 4096 bytes but data_offsets span 8192")));
}

TEST_F(LoaderTest, UnsupportedDtype) {
  raw_.header[kTensor]["dtype"] = "I32";  // same size as F32: passes bounds checks
  raw_.write(file());
  EXPECT_THAT(create_error(),
              AllOf(HasSubstr(file().string()), HasSubstr(kTensor), HasSubstr("dtype I32")));
}

TEST_F(LoaderTest, UnknownDtype) {
  raw_.header[kTensor]["dtype"] = "Q4_K";
  raw_.write(file());
  EXPECT_THAT(create_error(),
              AllOf(HasSubstr(file().string()), HasSubstr(kTensor), HasSubstr("unknown dtype")));
}

TEST_F(LoaderTest, BadJsonHeader) {
  std::string header = raw_.header.dump();
  header.back() = ',';  // an object that never closes
  raw_.write(file(), &header);
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string()), HasSubstr("invalid JSON")));
}

TEST_F(LoaderTest, MalformedHeaderEntry) {
  raw_.header[kTensor]["data_offsets"] = {-4, 12};
  raw_.write(file());
  EXPECT_THAT(create_error(),
              AllOf(HasSubstr(file().string()), HasSubstr(kTensor), HasSubstr("data_offsets")));
}

TEST_F(LoaderTest, MissingConfig) {
  std::filesystem::remove(dir_.path() / "config.json");
  EXPECT_THAT(create_error(), AllOf(HasSubstr("config.json"), HasSubstr("cannot open")));
}

TEST_F(LoaderTest, BadConfig) {
  std::ofstream(dir_.path() / "config.json") << "{\"hidden_size\": 64,";
  EXPECT_THAT(create_error(), AllOf(HasSubstr("config.json"), HasSubstr("invalid JSON")));
  std::ofstream(dir_.path() / "config.json")
      << R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2})";
  EXPECT_THAT(create_error(), AllOf(HasSubstr("config.json"), HasSubstr("intermediate_size")));
  std::ofstream(dir_.path() / "config.json")
      << R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 300})";
  EXPECT_THAT(create_error(), AllOf(HasSubstr("config.json"), HasSubstr("num_key_value_heads")));
}

// From helper-151's fuzzer: layers_ was sized by config.json before any tensor was looked up, so
// num_hidden_layers 2^24 took 4.5 GB and 12 s to say a tensor was missing, and 2^27 aborted.
TEST_F(LoaderTest, MoreLayersInConfigThanInTheCheckpoint) {
  for (const uint32_t layers : {3u, 1u << 24, 1u << 30}) {
    edit_config([&](json& c) { c["num_hidden_layers"] = layers; });
    EXPECT_THAT(create_error(),
                AllOf(HasSubstr(file().string()),
                      HasSubstr("config.json's num_hidden_layers is " + std::to_string(layers) +
                                " but the checkpoint has 2"),
                      HasSubstr("model.layers." + std::to_string(layers - 1) + ".")));
  }
}

// A number past a double's range is nlohmann's out_of_range, not a parse_error: it escaped as
// "model 'cpu' create: [json.exception.out_of_range.406] ..." without the file.
TEST_F(LoaderTest, NumbersPastADoubleAreInvalidJson) {
  std::string header = raw_.header.dump();
  header.insert(1, R"("__metadata__": {"n": 1e400}, )");
  raw_.write(file(), &header);
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string() + ": invalid JSON header"),
                                    HasSubstr("number overflow")));
  EXPECT_THAT(config_error(R"({"model_type": "llama", "rope_theta": 1e400})"),
              AllOf(HasSubstr("config.json: invalid JSON"), HasSubstr("number overflow")));
}

// From helper-201's review: a million '[' parse, and then reading the value (the error's dump() of
// a bad dtype, a copy) overflowed the stack. Refused before parsing, naming the file.
TEST_F(LoaderTest, ValuesNestedAMillionLevelsDeepAreRefusedBeforeParsing) {
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  std::string header = raw_.header.dump();
  header.insert(1, R"("__metadata__": {"n": )" + deep + "}, ");
  raw_.write(file(), &header);
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string() + ": invalid JSON header"),
                                    HasSubstr("nest more than 128 levels deep")));
  EXPECT_THAT(
      config_error(R"({"model_type": "llama", "hidden_size": )" + deep + "}"),
      AllOf(HasSubstr("config.json: invalid JSON"), HasSubstr("nest more than 128 levels deep")));
}

// Each was "cannot mmap: No such device", "invalid JSON: ... unexpected end of input", or (a FIFO)
// blocked in open() for ever.
TEST_F(LoaderTest, AFileThatIsNotARegularOneIsNamedAsSuch) {
  for (const std::filesystem::path& path : {file(), config_file()}) {
    const std::filesystem::path saved = path.string() + ".saved";
    std::filesystem::rename(path, saved);
    std::filesystem::create_directory(path);
    EXPECT_THAT(create_error(),
                HasSubstr(path.string() + ": cannot open: a directory, not a file"));
    std::filesystem::remove(path);
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    EXPECT_THAT(create_error(), HasSubstr(path.string() + ": cannot open: not a regular file"));
    std::filesystem::remove(path);
    std::filesystem::rename(saved, path);
  }
}

// Each was read as if the key or field were absent.
TEST_F(LoaderTest, AValueOfTheWrongTypeIsNamedAsSuch) {
  raw_.header[kTensor]["dtype"] = 5;
  raw_.write(file());
  EXPECT_THAT(create_error(), AllOf(HasSubstr(file().string()), HasSubstr(kTensor),
                                    HasSubstr("'dtype' must be a string, got 5")));
}

TEST_F(LoaderTest, MissingPathOption) {
  try {
    core::VirtualClock clock;
    core::HostServices host("test", &clock);
    auto config = core::parse_deployment(
        "[model]\nplugin = \"cpu\"\n[[engines]]\nscheduler = { plugin = \"chunked\" }\n",
        dir_.path() / "deploy.toml", registry());
    core::ModelInstance model(config.model, dir_.path().string(), host);
    FAIL() << "created without a path";
  } catch (const core::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'path'"));
  }
}

TEST_F(LoaderTest, RelativePathResolvesAgainstTheDeploymentDirectory) {
  core::VirtualClock clock;
  core::HostServices host("test", &clock);
  auto config = core::parse_deployment(
      "[model]\nplugin = \"cpu\"\noptions = { path = \"" + dir_.path().filename().string() +
          "\" }\n[[engines]]\nscheduler = { plugin = \"chunked\" }\n",
      dir_.path().parent_path() / "deploy.toml", registry());
  EXPECT_NO_THROW(core::ModelInstance(config.model, dir_.path().parent_path().string(), host));
}

// Sharded checkpoints: the index json maps tensors to files.
class ShardedTest : public LoaderTest {
 protected:
  // Splits model.safetensors into two shards and an index, removing the single file.
  void shard() {
    Checkpoint whole(dir_.path());
    SafetensorsFile file(dir_.path() / "model.safetensors");
    std::vector<TensorData> shards[2];
    json map = json::object();
    int i = 0;
    for (const auto& [name, t] : file.tensors()) {
      TensorData d{name, t.dtype, t.shape, {t.data, t.data + t.bytes}};
      const int s = i++ % 2;
      map[name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
      shards[s].push_back(std::move(d));
    }
    write_safetensors(dir_.path() / "model-00001-of-00002.safetensors", shards[0]);
    write_safetensors(dir_.path() / "model-00002-of-00002.safetensors", shards[1]);
    std::ofstream(dir_.path() / "model.safetensors.index.json")
        << json{{"metadata", json::object()}, {"weight_map", map}}.dump();
    std::filesystem::remove(dir_.path() / "model.safetensors");
    index_ = map;
  }
  json index_;
};

TEST_F(ShardedTest, ShardedCheckpointGivesTheSameLogits) {
  const auto prompt = random_tokens(12, 300, 3);
  std::vector<float> single;
  {
    ModelHarness model(dir_.path());
    single = model.prefill(0, prompt, {12});
  }
  shard();
  ModelHarness model(dir_.path());
  EXPECT_EQ(model.prefill(0, prompt, {12}), single);
}

TEST_F(ShardedTest, TensorMissingFromItsShard) {
  shard();
  const std::string shard_name = index_[kTensor].get<std::string>();
  const std::filesystem::path shard_path = dir_.path() / shard_name;
  RawFile raw = RawFile::read(shard_path);
  raw.header.erase(kTensor);
  raw.write(shard_path);
  EXPECT_THAT(create_error(), AllOf(HasSubstr(shard_path.string()), HasSubstr(kTensor),
                                    HasSubstr("missing from this shard")));
}

TEST_F(ShardedTest, BadIndexJson) {
  shard();
  std::ofstream(dir_.path() / "model.safetensors.index.json") << "{\"weight_map\": [";
  EXPECT_THAT(create_error(),
              AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("invalid JSON")));
}

TEST_F(ShardedTest, AnIndexNestedPastTheLimitIsRefusedBeforeParsing) {
  shard();
  std::ofstream(dir_.path() / "model.safetensors.index.json", std::ios::trunc)
      << R"({"weight_map": )" + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_THAT(create_error(), AllOf(HasSubstr("model.safetensors.index.json: invalid JSON"),
                                    HasSubstr("nest more than 128 levels deep")));
}

TEST_F(ShardedTest, MissingShardFile) {
  shard();
  std::filesystem::remove(dir_.path() / "model-00002-of-00002.safetensors");
  EXPECT_THAT(create_error(),
              AllOf(HasSubstr("model-00002-of-00002.safetensors"), HasSubstr("cannot open")));
}

// From helper-151's fuzzer: "" and "." named the directory, "<dir>/: cannot mmap: No such device".
TEST_F(ShardedTest, AShardNamingTheDirectoryIsRefusedNamingTheTensor) {
  shard();
  for (const char* bad : {"", "."}) {
    json map = index_;
    map[kTensor] = bad;
    std::ofstream(dir_.path() / "model.safetensors.index.json", std::ios::trunc)
        << json{{"weight_map", map}}.dump();
    EXPECT_THAT(create_error(),
                AllOf(HasSubstr("model.safetensors.index.json: tensor '" + std::string(kTensor) +
                                "': shard '" + bad + "'"),
                      HasSubstr("must be a file name in the checkpoint directory")));
  }
  std::ofstream(dir_.path() / "model.safetensors.index.json", std::ios::trunc)
      << R"({"metadata": {"total_size": 1e400}, "weight_map": {}})";
  EXPECT_THAT(create_error(), AllOf(HasSubstr("model.safetensors.index.json: invalid JSON"),
                                    HasSubstr("number overflow")));
}

TEST(TinyCheckpoint, IsDeterministic) {
  TempDir a("det_a");
  TempDir b("det_b");
  write_tiny_checkpoint(small_spec(DType::kBF16), a.path());
  write_tiny_checkpoint(small_spec(DType::kBF16), b.path());
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json"}) {
    std::ifstream fa(a.path() / name, std::ios::binary);
    std::ifstream fb(b.path() / name, std::ios::binary);
    const std::string sa((std::istreambuf_iterator<char>(fa)), {});
    const std::string sb((std::istreambuf_iterator<char>(fb)), {});
    EXPECT_FALSE(sa.empty());
    EXPECT_EQ(sa, sb) << name;
  }
}

TEST(TinyCheckpoint, RejectsInvalidShapes) {
  TempDir dir("invalid");
  TinyModelSpec spec = small_spec();
  spec.kv_heads = 3;
  EXPECT_THROW(write_tiny_checkpoint(spec, dir.path()), sdk::Error);
  spec = small_spec();
  spec.vocab = 100;
  EXPECT_THROW(write_tiny_checkpoint(spec, dir.path()), sdk::Error);
}

TEST(LlamaConfig, ReadsLlama31StyleFields) {
  const LlamaConfig c = parse_llama_config(
      R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
          "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
          "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
          "rope_theta": 500000.0, "bos_token_id": 128000, "eos_token_id": [128001, 128008],
          "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192, "rope_type": "llama3"},
          "tie_word_embeddings": false, "torch_dtype": "bfloat16"})",
      "config.json");
  EXPECT_EQ(c.head_dim, 128u);
  EXPECT_EQ(c.num_key_value_heads, 8u);
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_TRUE(c.rope_scaling.llama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_THROW(
      parse_llama_config(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})",
                         "config.json"),
      sdk::Error);
}

// The message parse_llama_config throws for `text`, or "" when it parses.
std::string config_error(const std::string& text) {
  try {
    parse_llama_config(text, "config.json");
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  return "";
}

// The fields of Qwen's own configs (Qwen2.5-0.5B-Instruct's, Qwen3-0.6B's) decide the variant.
TEST(LlamaConfig, ReadsTheQwenVariants) {
  const LlamaConfig qwen2 = parse_llama_config(
      R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
          "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
          "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
          "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
          "use_sliding_window": false, "max_window_layers": 21, "tie_word_embeddings": true,
          "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16"})",
      "config.json");
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias);
  EXPECT_FALSE(qwen2.qk_norm);
  EXPECT_EQ(qwen2.head_dim, 64u);
  EXPECT_EQ(qwen2.sliding_window, 0u);  // named, but not used
  EXPECT_EQ(resolve_max_model_len(qwen2, 0, "cpu model"), 32768u);

  const LlamaConfig qwen3 = parse_llama_config(
      R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
          "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
          "num_key_value_heads": 8, "head_dim": 128, "attention_bias": false,
          "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
          "rope_theta": 1000000, "rope_scaling": null, "sliding_window": null,
          "use_sliding_window": false, "tie_word_embeddings": true, "eos_token_id": 151645})",
      "config.json");
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_EQ(qwen3.head_dim, 128u);  // not hidden_size / heads (64)
  // Qwen3Config's own default when config.json leaves head_dim out.
  EXPECT_EQ(parse_llama_config(R"({"model_type": "qwen3", "hidden_size": 1024,
                "intermediate_size": 3072, "num_hidden_layers": 2, "num_attention_heads": 16,
                "num_key_value_heads": 8, "vocab_size": 300})",
                               "config.json")
                .head_dim,
            128u);
  EXPECT_THAT(config_error(R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96,
                "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
                "dual_chunk_attention_config": {"chunk_size": 262144}})"),
              HasSubstr("dual_chunk_attention_config"));

  const std::string shape = R"("hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300)";
  const std::string llama = R"("model_type": "llama", )" + shape;
  const LlamaConfig biased =
      parse_llama_config("{" + llama + R"(, "attention_bias": true})", "config.json");
  EXPECT_TRUE(biased.qkv_bias);
  EXPECT_TRUE(biased.o_bias);  // Llama's attention_bias covers o_proj too

  EXPECT_THAT(config_error("{" + shape + R"(, "model_type": "gemma2"})"),
              AllOf(HasSubstr("config.json"), HasSubstr("model_type 'gemma2' is not supported"),
                    HasSubstr("qwen2")));
  EXPECT_THAT(config_error("{" + llama + R"(, "mlp_bias": true})"), HasSubstr("mlp_bias"));
  EXPECT_THAT(config_error("{" + llama + R"(, "attention_bias": "yes"})"),
              HasSubstr("'attention_bias' must be a boolean"));
  EXPECT_THAT(config_error("{" + shape + R"(, "model_type": "qwen2", "use_sliding_window": true})"),
              HasSubstr("use_sliding_window"));
  // What transformers would compute otherwise: no model_type (a Phi-3 with Llama-like keys), a
  // head other than the LM head, an activation other than SiLU.
  EXPECT_THAT(config_error("{" + shape + R"(, "architectures": ["Phi3ForCausalLM"]})"),
              AllOf(HasSubstr("config.json"), HasSubstr("missing key 'model_type'")));
  EXPECT_THAT(config_error("{" + shape + R"(, "model_type": 3})"),
              HasSubstr("key 'model_type' must be a string (supported: llama, mistral, qwen2, "
                        "qwen3), got 3"));
  EXPECT_THAT(
      config_error("{" + llama + R"(, "architectures": ["LlamaForSequenceClassification"]})"),
      AllOf(HasSubstr(R"(architectures ["LlamaForSequenceClassification"])"),
            HasSubstr("no causal language model")));
  EXPECT_EQ(config_error("{" + llama + R"(, "architectures": ["LlamaForCausalLM"]})"), "");
  EXPECT_THAT(config_error("{" + llama + R"(, "hidden_act": "gelu"})"),
              AllOf(HasSubstr(R"(hidden_act "gelu" is not supported)"), HasSubstr("SiLU")));
  EXPECT_EQ(config_error("{" + llama + R"(, "hidden_act": "silu"})"), "");
}

// Mistral 7B v0.1 attends within 4096 positions on every layer: exact up to the window, so the
// context is bounded by it rather than computed wrongly past it.
TEST(LlamaConfig, AMistralSlidingWindowBoundsTheContext) {
  const LlamaConfig c = parse_llama_config(
      R"({"model_type": "mistral", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
          "max_position_embeddings": 32768, "sliding_window": 4096})",
      "config.json");
  EXPECT_EQ(c.sliding_window, 4096u);
  EXPECT_EQ(resolve_max_model_len(c, 0, "cpu model"), 4096u);
  EXPECT_EQ(resolve_max_model_len(c, 2048, "cpu model"), 2048u);
  EXPECT_EQ(resolve_max_model_len(c, 4096, "cpu model"), 4096u);  // i - j < window: all exact
  EXPECT_THROW(resolve_max_model_len(c, 4097, "cpu model"), sdk::Error);
  try {
    resolve_max_model_len(c, 8192, "cpu model");
    FAIL() << "a context past the window";
  } catch (const sdk::Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("cpu model: max_model_len 8192"),
                                HasSubstr("sliding_window 4096"), HasSubstr("at most 4096")));
  }
  const LlamaConfig no_window = parse_llama_config(
      R"({"model_type": "mistral", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
          "max_position_embeddings": 32768, "sliding_window": null})",
      "config.json");
  EXPECT_EQ(resolve_max_model_len(no_window, 0, "cpu model"), 32768u);
  EXPECT_EQ(resolve_max_model_len(no_window, 65536, "cpu model"), 65536u);
  // Absent is not null: Hugging Face's MistralConfig then takes 4096. Llama has no window.
  const std::string shape = R"("hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
      "max_position_embeddings": 32768)";
  EXPECT_EQ(parse_llama_config(R"({"model_type": "mistral", )" + shape + "}", "config.json")
                .sliding_window,
            4096u);
  EXPECT_EQ(parse_llama_config(R"({"model_type": "llama", "sliding_window": 4096, )" + shape + "}",
                               "config.json")
                .sliding_window,
            0u);
  // Mistral's projections have no biases whatever attention_bias says (as Hugging Face builds it).
  EXPECT_FALSE(
      parse_llama_config(R"({"model_type": "mistral", "attention_bias": true, )" + shape + "}",
                         "config.json")
          .qkv_bias);
}

// From helper-151's fuzzer: head_dim 2^30 x 4 heads wrapped 32 bits to a shape of [0, 64] that a
// crafted checkpoint matched, and RoPE's table took gigabytes.
TEST(LlamaConfig, RefusesHeadWidthsPastAnyModels) {
  const std::string llama = R"("model_type": "llama", "intermediate_size": 96,
      "num_hidden_layers": 2, "vocab_size": 300)";
  EXPECT_THAT(
      config_error("{" + llama +
                   R"(, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 1073741824})"),
      AllOf(HasSubstr("config.json: head_dim 1073741824"), HasSubstr("exceeds 1024"),
            HasSubstr("up to 256")));
  EXPECT_THAT(config_error("{" + llama + R"(, "hidden_size": 1048576, "num_attention_heads": 1})"),
              HasSubstr("head_dim 1048576 (hidden_size / num_attention_heads) exceeds 1024"));
  EXPECT_THAT(
      config_error("{" + llama +
                   R"(, "hidden_size": 64, "num_attention_heads": 2048, "head_dim": 1024})"),
      HasSubstr("num_attention_heads x head_dim (2048 x 1024) exceeds 1048576"));
  EXPECT_EQ(config_error("{" + llama +
                         R"(, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 1024})"),
            "");
}

// From helper-151's fuzzer: each was accepted without a word.
TEST(LlamaConfig, RefusesScalingAndTokenIdsItCannotUse) {
  const std::string llama = R"("model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300)";
  // Taken for no scaling at all, factor dropped.
  EXPECT_THAT(config_error("{" + llama + R"(, "rope_scaling": {"rope_type": 3, "factor": 8.0}})"),
              HasSubstr("config.json: rope_scaling.rope_type must be a string, got 3"));
  EXPECT_THAT(config_error("{" + llama + R"(, "rope_scaling": {"type": ["llama3"]}})"),
              HasSubstr("rope_scaling.type must be a string"));
  const auto llama3 = [&](const std::string& fields) {
    return config_error("{" + llama + R"(, "rope_scaling": {"rope_type": "llama3", )" + fields +
                        "}}");
  };
  EXPECT_EQ(llama3(R"("factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192)"),
            "");
  for (const char* low : {"0", "-1.0"}) {
    EXPECT_THAT(
        llama3(std::string(R"("low_freq_factor": )") + low),
        HasSubstr("rope_scaling (llama3): low_freq_factor must be > 0, got " + std::string(low)));
  }
  for (const char* original : {"0.5", "8192.5", "0", "-8192", "1e+300", "\"8192\""}) {
    EXPECT_THAT(llama3(std::string(R"("original_max_position_embeddings": )") + original),
                HasSubstr("key 'original_max_position_embeddings' must be a positive integer, "
                          "got " +
                          std::string(original)))
        << original;
  }
  // Written as a float, as converted configs may have it: Hugging Face takes it, and so do the
  // other integer keys (the simulated model's reader did already).
  EXPECT_EQ(llama3(R"("original_max_position_embeddings": 8192.0)"), "");
  EXPECT_EQ(config_error(R"({"model_type": "llama", "hidden_size": 64.0, "intermediate_size": 96,
      "num_hidden_layers": 2.0, "num_attention_heads": 4, "vocab_size": 300.0})"),
            "");
  EXPECT_THAT(config_error("{" + llama + R"(, "max_position_embeddings": 4096.5})"),
              HasSubstr("key 'max_position_embeddings' must be a positive integer, got 4096.5"));
  // Ids outside the vocabulary: 2^40 was cast to token 0.
  EXPECT_EQ(config_error("{" + llama + R"(, "bos_token_id": 0, "eos_token_id": [299, 1]})"), "");
  EXPECT_THAT(config_error("{" + llama + R"(, "eos_token_id": 1099511627776})"),
              HasSubstr("config.json: key 'eos_token_id': token id 1099511627776 is outside the "
                        "vocabulary [0, 300) of vocab_size"));
  EXPECT_THAT(config_error("{" + llama + R"(, "eos_token_id": [1, 300]})"),
              HasSubstr("key 'eos_token_id': token id 300 is outside"));
  EXPECT_THAT(config_error("{" + llama + R"(, "bos_token_id": -2})"),
              HasSubstr("key 'bos_token_id': token id -2 is outside"));
  EXPECT_THAT(config_error("{" + llama + R"(, "eos_token_id": [1, "2"]})"),
              HasSubstr(R"(key 'eos_token_id' must be a token id or a list of them, got [1,"2"])"));
}

// Transformers 5 writes rope_theta and the scaling together, as rope_parameters.
TEST(LlamaConfig, ReadsRopeParameters) {
  const std::string shape = R"("model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300)";
  const LlamaConfig c = parse_llama_config(
      "{" + shape + R"(, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3",
          "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}})",
      "config.json");
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_TRUE(c.rope_scaling.llama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  const LlamaConfig plain = parse_llama_config(
      "{" + shape + R"(, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}})",
      "config.json");
  EXPECT_DOUBLE_EQ(plain.rope_theta, 1000000.0);
  EXPECT_FALSE(plain.rope_scaling.llama3);
  EXPECT_THAT(config_error("{" + shape +
                           R"(, "rope_parameters": {"rope_theta": 1e6, "rope_type": "yarn"}})"),
              HasSubstr("rope_parameters type 'yarn' is not supported"));
}

// A Qwen checkpoint without its biases or norms is refused naming the tensor, as any other.
TEST(TinyCheckpoint, AQwenCheckpointMissingItsExtraTensorsIsRefused) {
  for (const char* architecture : {"qwen2", "qwen3"}) {
    TempDir dir(architecture);
    TinyModelSpec spec = small_spec();
    spec.architecture = architecture;
    write_tiny_checkpoint(spec, dir.path());
    EXPECT_NO_THROW(ModelHarness model(dir.path()));
    const std::string tensor = std::string(architecture) == "qwen2"
                                   ? "model.layers.1.self_attn.v_proj.bias"
                                   : "model.layers.1.self_attn.k_norm.weight";
    RawFile raw = RawFile::read(dir.path() / "model.safetensors");
    ASSERT_TRUE(raw.header.contains(tensor));
    raw.header.erase(tensor);
    raw.write(dir.path() / "model.safetensors");
    try {
      ModelHarness model(dir.path());
      ADD_FAILURE() << architecture << ": loaded without " << tensor;
    } catch (const core::Error& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr(tensor), HasSubstr("not found")));
    }
  }
}

}  // namespace
}  // namespace headway::models::cpu::testing
