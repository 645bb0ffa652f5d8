#include "tiny_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <headway/sdk/status.hpp>
#include <nlohmann/json.hpp>
#include <vector>

#include "half.h"
#include "safetensors_writer.h"

namespace headway::models::cpu {
namespace {

using nlohmann::ordered_json;

// splitmix64: a counter-based generator, so every tensor's values depend only on (seed, tensor
// index, element index) and the checkpoint is reproducible bit for bit.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [-scale, scale) (plus `offset`), stored in the requested dtype.
TensorData random_tensor(const std::string& name, std::vector<uint64_t> shape, DType dtype,
                         uint64_t stream, float scale, float offset = 0.0f) {
  TensorData t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  uint64_t n = 1;
  for (uint64_t d : t.shape) n *= d;
  t.bytes.resize(n * dtype_size(dtype));
  const uint64_t base = mix64(stream);
  for (uint64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(mix64(base + i) >> 11) * 0x1.0p-53;  // [0, 1)
    const float v = offset + scale * static_cast<float>(2.0 * u - 1.0);
    if (dtype == DType::kF32) {
      std::memcpy(t.bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
  }
  return t;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << text) || !out.flush()) {
    throw sdk::Error(HW_INTERNAL, path.string() + ": cannot write");
  }
}

const char* torch_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kF16:
      return "float16";
    case DType::kBF16:
      return "bfloat16";
  }
  return "float32";
}

uint32_t head_dim_of(const TinyModelSpec& s) {
  return s.head_dim != 0 ? s.head_dim : s.hidden / std::max(s.heads, 1u);
}

// The tensors the spec's config.json asks for, as the loader reads it (LlamaConfig's qkv_bias,
// o_bias and qk_norm).
bool has_qkv_bias(const TinyModelSpec& s) { return s.architecture == "qwen2" || s.attention_bias; }
bool has_qk_norm(const TinyModelSpec& s) { return s.architecture == "qwen3"; }

}  // namespace

void validate(const TinyModelSpec& s) {
  const auto need = [](bool ok, const std::string& message) {
    if (!ok) throw sdk::Error(HW_INVALID_ARGUMENT, "make-tiny: " + message);
  };
  need(s.layers >= 1 && s.layers <= 1024, "--layers must be in [1, 1024]");
  need(s.hidden >= 2 && s.hidden <= 65536, "--hidden must be in [2, 65536]");
  need(s.heads >= 1 && (s.head_dim != 0 || s.hidden % s.heads == 0),
       "--hidden must be a multiple of --heads");
  need(head_dim_of(s) % 2 == 0 && head_dim_of(s) <= 1024,
       "head dimension (--hidden / --heads) must be even, at most 1024");
  need(!s.attention_bias || s.architecture != "qwen2",
       "attention_bias is for llama and qwen3 (qwen2 has its own biases)");
  need(s.kv_heads >= 1 && s.heads % s.kv_heads == 0, "--heads must be a multiple of --kv-heads");
  need(s.ffn >= 1 && s.ffn <= 1u << 20, "--ffn must be in [1, 1048576]");
  need(s.vocab >= kTinyMinVocab && s.vocab <= 1u << 22,
       "--vocab must be in [259, 4194304] (at least 256 bytes + <s>, </s>, <pad>)");
  need(s.max_position_embeddings >= 16, "max_position_embeddings must be at least 16");
  need(s.architecture == "llama" || s.architecture == "qwen2" || s.architecture == "qwen3",
       "--architecture must be llama, qwen2 or qwen3");
  // Each size may be in range while their product is not: the weights are built in memory (as
  // F32, then written as F16), so a shape past this would exhaust memory rather than fail here.
  constexpr uint64_t kMaxParameters = uint64_t{1} << 30;
  const uint64_t parameters = parameter_count(s);
  need(parameters <= kMaxParameters, "this shape has " + std::to_string(parameters) +
                                         " parameters; make-tiny builds test "
                                         "models of at most " +
                                         std::to_string(kMaxParameters) + " (use smaller sizes)");
}

uint64_t parameter_count(const TinyModelSpec& s) {
  const uint64_t head_dim = head_dim_of(s);
  const uint64_t attn =
      uint64_t{s.hidden} * s.heads * head_dim * 2 + uint64_t{s.hidden} * s.kv_heads * head_dim * 2;
  const uint64_t mlp = uint64_t{3} * s.hidden * s.ffn;
  const uint64_t biases = has_qkv_bias(s) ? uint64_t{s.heads + 2 * s.kv_heads} * head_dim : 0;
  const uint64_t extras =
      biases + (s.attention_bias ? s.hidden : 0) + (has_qk_norm(s) ? 2 * head_dim : 0);
  const uint64_t per_layer = attn + mlp + 2 * uint64_t{s.hidden} + extras;
  const uint64_t embed = uint64_t{s.vocab} * s.hidden;
  return s.layers * per_layer + embed * (s.tie_word_embeddings ? 1 : 2) + s.hidden;
}

void write_tiny_checkpoint(const TinyModelSpec& s, const std::filesystem::path& dir) {
  validate(s);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw sdk::Error(HW_INTERNAL, dir.string() + ": cannot create: " + ec.message());

  const uint32_t head_dim = head_dim_of(s);
  const bool qwen = s.architecture != "llama";
  const std::string class_name = s.architecture == "qwen2"   ? "Qwen2ForCausalLM"
                                 : s.architecture == "qwen3" ? "Qwen3ForCausalLM"
                                                             : "LlamaForCausalLM";
  ordered_json config = {{"architectures", {class_name}},
                         {"model_type", s.architecture},
                         {"hidden_size", s.hidden},
                         {"intermediate_size", s.ffn},
                         {"num_hidden_layers", s.layers},
                         {"num_attention_heads", s.heads},
                         {"num_key_value_heads", s.kv_heads},
                         {"head_dim", head_dim},
                         {"hidden_act", "silu"},
                         {"rms_norm_eps", 1e-5},
                         {"rope_theta", 500000.0},
                         {"max_position_embeddings", s.max_position_embeddings},
                         {"vocab_size", s.vocab},
                         {"tie_word_embeddings", s.tie_word_embeddings},
                         {"bos_token_id", kTinyBosToken},
                         {"eos_token_id", kTinyEosToken},
                         {"torch_dtype", torch_dtype(s.dtype)},
                         {"headway_seed", s.seed}};
  if (s.attention_bias) config["attention_bias"] = true;
  if (qwen) {
    // As Qwen's own configs say it: a window named but not used, which must not bound the context.
    config["use_sliding_window"] = false;
    config["sliding_window"] = s.max_position_embeddings / 2;
    config["rope_scaling"] = nullptr;
  } else if (s.llama3_rope_scaling) {
    // Llama 3.1's scaling, so the reference test exercises the llama3 frequency bands.
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192}};
  } else {
    config["rope_scaling"] = nullptr;
  }
  write_text(dir / "config.json", config.dump(2) + "\n");

  // Scales keep activations O(1) through the layers (uniform with variance 1/fan_in) so that the
  // random model produces varied, non-degenerate logits.
  const auto fan_in = [](uint32_t n) { return std::sqrt(3.0f / static_cast<float>(n)); };
  std::vector<TensorData> tensors;
  uint64_t stream = s.seed * 1000003ULL;
  const auto next = [&] { return stream++; };
  const uint64_t q_out = uint64_t{s.heads} * head_dim;
  const uint64_t kv_out = uint64_t{s.kv_heads} * head_dim;
  tensors.push_back(
      random_tensor("model.embed_tokens.weight", {s.vocab, s.hidden}, s.dtype, next(), 1.0f));
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    tensors.push_back(
        random_tensor(p + "input_layernorm.weight", {s.hidden}, s.dtype, next(), 0.1f, 1.0f));
    tensors.push_back(random_tensor(p + "self_attn.q_proj.weight", {q_out, s.hidden}, s.dtype,
                                    next(), fan_in(s.hidden)));
    tensors.push_back(random_tensor(p + "self_attn.k_proj.weight", {kv_out, s.hidden}, s.dtype,
                                    next(), fan_in(s.hidden)));
    tensors.push_back(random_tensor(p + "self_attn.v_proj.weight", {kv_out, s.hidden}, s.dtype,
                                    next(), fan_in(s.hidden)));
    tensors.push_back(random_tensor(p + "self_attn.o_proj.weight", {s.hidden, q_out}, s.dtype,
                                    next(), fan_in(static_cast<uint32_t>(q_out))));
    if (has_qkv_bias(s)) {
      // Biases as large as a projection's typical output, so that leaving one out shows.
      for (const auto& [name, size] :
           {std::pair{"q_proj", q_out}, std::pair{"k_proj", kv_out}, std::pair{"v_proj", kv_out}}) {
        tensors.push_back(
            random_tensor(p + "self_attn." + name + ".bias", {size}, s.dtype, next(), 1.0f));
      }
    }
    if (s.attention_bias) {
      tensors.push_back(
          random_tensor(p + "self_attn.o_proj.bias", {s.hidden}, s.dtype, next(), 1.0f));
    }
    if (has_qk_norm(s)) {
      for (const char* name : {"q_norm", "k_norm"}) {
        tensors.push_back(random_tensor(p + "self_attn." + name + ".weight", {head_dim}, s.dtype,
                                        next(), 0.5f, 1.0f));
      }
    }
    tensors.push_back(random_tensor(p + "post_attention_layernorm.weight", {s.hidden}, s.dtype,
                                    next(), 0.1f, 1.0f));
    tensors.push_back(random_tensor(p + "mlp.gate_proj.weight", {s.ffn, s.hidden}, s.dtype, next(),
                                    fan_in(s.hidden)));
    tensors.push_back(random_tensor(p + "mlp.up_proj.weight", {s.ffn, s.hidden}, s.dtype, next(),
                                    fan_in(s.hidden)));
    tensors.push_back(random_tensor(p + "mlp.down_proj.weight", {s.hidden, s.ffn}, s.dtype, next(),
                                    fan_in(s.ffn)));
  }
  tensors.push_back(random_tensor("model.norm.weight", {s.hidden}, s.dtype, next(), 0.1f, 1.0f));
  if (!s.tie_word_embeddings) {
    // Larger than fan-in scale so that the random model's next-token distribution is peaked
    // enough for greedy and top-k/top-p to differ visibly.
    tensors.push_back(random_tensor("lm_head.weight", {s.vocab, s.hidden}, s.dtype, next(),
                                    4.0f * fan_in(s.hidden)));
  }
  write_safetensors(dir / "model.safetensors", tensors);

  // The byte-level tokenizer (core/include/headway/core/byte_tokenizer.h reads this).
  ordered_json tokenizer = {{"version", "1.0"},
                            {"model", {{"type", "HeadwayByte"}, {"byte_offset", 0}}},
                            {"added_tokens",
                             {{{"id", kTinyBosToken}, {"content", "<s>"}, {"special", true}},
                              {{"id", kTinyEosToken}, {"content", "</s>"}, {"special", true}},
                              {{"id", kTinyPadToken}, {"content", "<pad>"}, {"special", true}}}},
                            {"bos_token", "<s>"},
                            {"eos_token", "</s>"},
                            {"vocab_size", s.vocab}};
  write_text(dir / "tokenizer.json", tokenizer.dump(2) + "\n");
}

}  // namespace headway::models::cpu
