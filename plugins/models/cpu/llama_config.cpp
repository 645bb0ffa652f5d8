#include "llama_config.h"

#include <algorithm>
#include <cmath>
#include <headway/sdk/json_depth.hpp>
#include <headway/sdk/status.hpp>
#include <nlohmann/json.hpp>
#include <system_error>

#include "safetensors.h"

namespace headway::models::cpu {
namespace {

// Hugging Face's MistralConfig's sliding_window when config.json does not say (Mistral 7B v0.1's).
constexpr uint32_t kMistralDefaultSlidingWindow = 4096;
// Hugging Face's Llama-family models use head_dim 64 to 256 and at most 128 x 128 for the query
// heads together (Llama 3.1 405B). Far past both, a config is corrupt: head_dim 2^30 x 4 heads
// wrapped 32 bits, and RoPE's table alone took gigabytes (helper-151's fuzzer).
constexpr uint32_t kMaxHeadDim = 1024;
constexpr uint64_t kMaxQueryWidth = 1u << 20;

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& message) {
  throw sdk::Error(HW_INVALID_ARGUMENT, file + ": " + message);
}

uint32_t get_dim(const json& j, const std::string& file, const char* key, bool required,
                 uint32_t fallback = 0) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) fail(file, std::string("missing key '") + key + "'");
    return fallback;
  }
  // transformers takes 4096.0 for 4096, as the simulated model's reader does (hf_config.cpp).
  const double value = it->is_number() ? it->get<double>() : 0.0;
  if (!it->is_number() || value != std::floor(value) || !(value > 0) || value > (1LL << 30)) {
    fail(file, std::string("key '") + key + "' must be a positive integer, got " + it->dump());
  }
  return static_cast<uint32_t>(value);
}

double get_number(const json& j, const std::string& file, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail(file, std::string("key '") + key + "' must be a number");
  return it->get<double>();
}

bool get_flag(const json& j, const std::string& file, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(file, std::string("key '") + key + "' must be a boolean");
  return it->get<bool>();
}

// bos/eos may be an integer, a list of integers (Llama 3.1 lists several eos ids) or null; the
// first is the one used. Each must be a token of the vocabulary: 2^40 became token 0 in 32 bits.
int64_t get_token(const json& j, const std::string& file, const char* key, uint32_t vocab_size) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  const bool list = it->is_array();
  if (list && it->empty()) fail(file, std::string("key '") + key + "' is an empty list");
  const json single = json::array({*it});
  for (const json& v : list ? *it : single) {
    if (!v.is_number_integer()) {
      fail(file, std::string("key '") + key + "' must be a token id or a list of them, got " +
                     it->dump());
    }
    const bool inside = v.is_number_unsigned()
                            ? v.get<uint64_t>() < vocab_size
                            : v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab_size;
    if (!inside) {
      fail(file, std::string("key '") + key + "': token id " + v.dump() +
                     " is outside the vocabulary [0, " + std::to_string(vocab_size) +
                     ") of vocab_size");
    }
  }
  return (list ? (*it)[0] : *it).get<int64_t>();
}

}  // namespace

LlamaConfig parse_llama_config(const std::string& text, const std::string& file) {
  // Before parsing: a value nested a million levels deep overflows the stack when read (dump()).
  if (const std::string problem = sdk::json_depth_problem(text); !problem.empty()) {
    fail(file, "invalid JSON: " + problem);
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // out_of_range too: a number past a double's (1e400)
    fail(file, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(file, "expected a JSON object");

  LlamaConfig c;
  // Required, as Hugging Face's AutoConfig requires it: without it a Phi-3 or any other decoder
  // with Llama-like keys would load as a Llama and compute something else.
  const auto model_type = j.find("model_type");
  if (model_type == j.end() || model_type->is_null()) {
    fail(file,
         "missing key 'model_type' (a string; supported: llama, mistral, qwen2, qwen3: decoders "
         "of the Llama architecture)");
  }
  if (!model_type->is_string()) {
    fail(file, "key 'model_type' must be a string (supported: llama, mistral, qwen2, qwen3), got " +
                   model_type->dump());
  }
  c.model_type = model_type->get<std::string>();
  if (c.model_type != "llama" && c.model_type != "mistral" && c.model_type != "qwen2" &&
      c.model_type != "qwen3") {
    fail(file, "model_type '" + c.model_type +
                   "' is not supported (supported: llama, mistral, qwen2, qwen3: decoders of the "
                   "Llama architecture)");
  }
  // A head other than the language-model head (LlamaForSequenceClassification's `score`) is not
  // this model: with tied embeddings it would even load, the embedding taken for the LM head.
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    bool causal_lm = false;
    if (it->is_array()) {
      for (const json& a : *it) {
        causal_lm = causal_lm || (a.is_string() && a.get<std::string>().ends_with("ForCausalLM"));
      }
    }
    if (!causal_lm) {
      fail(file, "architectures " + it->dump() +
                     " names no causal language model (...ForCausalLM): Headway serves those only");
    }
  }
  // The MLP is SwiGLU: SiLU of the gate times the up projection ("swish" is SiLU's other name).
  if (auto it = j.find("hidden_act"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "silu" && *it != "swish")) {
      fail(file, "hidden_act " + it->dump() +
                     " is not supported: the MLP computes SiLU (hidden_act \"silu\")");
    }
  }
  // As Hugging Face builds each: Qwen 2 always has biases on q, k and v (not o); Mistral never has
  // any; Llama and Qwen 3 have them, o included, where attention_bias says so. Qwen 3 normalizes
  // each head of q and k before RoPE.
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;
  } else if (c.model_type != "mistral") {
    c.qkv_bias = c.o_bias = get_flag(j, file, "attention_bias", false);
  }
  c.qk_norm = c.model_type == "qwen3";
  if (get_flag(j, file, "mlp_bias", false)) {
    fail(file, "mlp_bias = true (biases on the MLP's projections) is not supported");
  }
  // Qwen says whether its sliding window is used; Mistral uses one unless it says null (Hugging
  // Face's MistralConfig takes 4096 when the key is absent). A window on every layer is exact up to
  // its length, so the context is bounded by it; Qwen's windows on some layers only are not
  // supported, nor is Qwen 2.5-1M's dual chunk attention past the trained length.
  const bool qwen = c.model_type == "qwen2" || c.model_type == "qwen3";
  if (qwen && get_flag(j, file, "use_sliding_window", false)) {
    fail(file,
         "use_sliding_window = true (sliding-window attention on some layers) is not "
         "supported");
  }
  if (auto it = j.find("dual_chunk_attention_config"); it != j.end() && !it->is_null()) {
    fail(file,
         "dual_chunk_attention_config (Qwen 2.5-1M's long-context attention) is not "
         "supported");
  }
  if (c.model_type == "mistral") {
    c.sliding_window = j.contains("sliding_window") ? get_dim(j, file, "sliding_window", false, 0)
                                                    : kMistralDefaultSlidingWindow;
  }
  c.hidden_size = get_dim(j, file, "hidden_size", true);
  c.intermediate_size = get_dim(j, file, "intermediate_size", true);
  c.num_hidden_layers = get_dim(j, file, "num_hidden_layers", true);
  c.num_attention_heads = get_dim(j, file, "num_attention_heads", true);
  c.num_key_value_heads = get_dim(j, file, "num_key_value_heads", false, c.num_attention_heads);
  c.vocab_size = get_dim(j, file, "vocab_size", true);
  c.max_position_embeddings = get_dim(j, file, "max_position_embeddings", false, 2048);
  // Qwen 3's head_dim is not hidden_size / heads: Hugging Face's Qwen3Config takes 128 when absent.
  c.head_dim = get_dim(j, file, "head_dim", false, c.model_type == "qwen3" ? 128 : 0);
  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_attention_heads != 0) {
      fail(file, "hidden_size " + std::to_string(c.hidden_size) +
                     " is not a multiple of num_attention_heads " +
                     std::to_string(c.num_attention_heads) + " and head_dim is not given");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim > kMaxHeadDim) {
    fail(file,
         "head_dim " + std::to_string(c.head_dim) +
             (j.value("head_dim", json()).is_null() ? " (hidden_size / num_attention_heads)" : "") +
             " exceeds " + std::to_string(kMaxHeadDim) +
             ", past any Hugging Face model's (up to 256): the config is corrupt");
  }
  if (uint64_t{c.num_attention_heads} * c.head_dim > kMaxQueryWidth) {
    fail(file, "num_attention_heads x head_dim (" + std::to_string(c.num_attention_heads) + " x " +
                   std::to_string(c.head_dim) + ") exceeds " + std::to_string(kMaxQueryWidth) +
                   ", past any Hugging Face model's (up to 128 x 128): the config is corrupt");
  }
  if (c.head_dim % 2 != 0) fail(file, "head_dim must be even for rotary embeddings");
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fail(file, "num_attention_heads " + std::to_string(c.num_attention_heads) +
                   " is not a multiple of num_key_value_heads " +
                   std::to_string(c.num_key_value_heads));
  }
  c.rms_norm_eps = get_number(j, file, "rms_norm_eps", 1e-5);
  if (!(c.rms_norm_eps > 0)) fail(file, "key 'rms_norm_eps' must be > 0");
  // Transformers 5 writes rope_theta and the scaling together as rope_parameters, in place of
  // rope_theta and rope_scaling.
  const char* scaling_key = j.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const auto scaling_it = j.find(scaling_key);
  const bool has_scaling = scaling_it != j.end() && !scaling_it->is_null();
  if (has_scaling && !scaling_it->is_object()) {
    fail(file, std::string("key '") + scaling_key + "' must be an object or null");
  }
  c.rope_theta = get_number(j, file, "rope_theta", 10000.0);
  if (has_scaling) c.rope_theta = get_number(*scaling_it, file, "rope_theta", c.rope_theta);
  if (!(c.rope_theta > 1)) fail(file, "key 'rope_theta' must be > 1");
  if (auto it = j.find("tie_word_embeddings"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) fail(file, "key 'tie_word_embeddings' must be a boolean");
    c.tie_word_embeddings = it->get<bool>();
  }
  c.bos_token_id = get_token(j, file, "bos_token_id", c.vocab_size);
  c.eos_token_id = get_token(j, file, "eos_token_id", c.vocab_size);
  if (auto it = j.find("torch_dtype"); it != j.end() && it->is_string()) {
    c.torch_dtype = it->get<std::string>();
  }

  if (has_scaling) {
    const json& scaling = *scaling_it;
    std::string type;
    for (const char* key : {"rope_type", "type"}) {
      if (auto t = scaling.find(key); t != scaling.end() && !t->is_null()) {
        // Not taken for "no scaling", which would drop factor without a word.
        if (!t->is_string()) {
          fail(file, std::string(scaling_key) + "." + key + " must be a string, got " + t->dump());
        }
        type = t->get<std::string>();
        break;
      }
    }
    if (type == "llama3") {
      RopeScaling& s = c.rope_scaling;
      s.llama3 = true;
      s.factor = get_number(scaling, file, "factor", 8.0);
      s.low_freq_factor = get_number(scaling, file, "low_freq_factor", 1.0);
      s.high_freq_factor = get_number(scaling, file, "high_freq_factor", 4.0);
      // A positive integer, as Hugging Face's _validate_llama3_parameters asks (8192.0 taken).
      s.original_max_position_embeddings =
          get_dim(scaling, file, "original_max_position_embeddings", false, 8192);
      // Hugging Face divides the original context by low_freq_factor.
      if (!(s.low_freq_factor > 0)) {
        fail(file, std::string(scaling_key) + " (llama3): low_freq_factor must be > 0, got " +
                       scaling.at("low_freq_factor").dump());
      }
      if (!(s.factor > 0) || !(s.high_freq_factor > s.low_freq_factor)) {
        fail(file, std::string(scaling_key) +
                       " (llama3): need factor > 0 and high_freq_factor > low_freq_factor");
      }
    } else if (type != "default" && !type.empty()) {
      fail(file, std::string(scaling_key) + " type '" + type +
                     "' is not supported (supported: llama3, default)");
    }
  }
  return c;
}

LlamaConfig load_llama_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "config.json";
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) {
    fail(path.string(), "cannot open (is this a Hugging Face checkpoint directory?)");
  }
  // Refuses a directory (read as empty text, "invalid JSON") and a FIFO (open() blocked for ever).
  return parse_llama_config(read_checkpoint_text(path), path.string());
}

uint32_t resolve_max_model_len(const LlamaConfig& config, int64_t asked, const std::string& who) {
  const uint32_t window = config.sliding_window;
  if (asked <= 0) {
    return window > 0 ? std::min(window, config.max_position_embeddings)
                      : config.max_position_embeddings;
  }
  if (window > 0 && asked > window) {
    throw sdk::Error(
        HW_INVALID_ARGUMENT,
        who + ": max_model_len " + std::to_string(asked) +
            " exceeds the checkpoint's sliding_window " + std::to_string(window) +
            ", beyond which its attention would differ from the model's (sliding-window "
            "attention is not supported); use at most " +
            std::to_string(window));
  }
  return static_cast<uint32_t>(asked);
}

hw_model_info model_info_of(const LlamaConfig& config, uint32_t max_model_len) {
  hw_model_info info{};
  info.struct_size = sizeof(hw_model_info);
  info.layers = config.num_hidden_layers;
  info.hidden = config.hidden_size;
  info.heads = config.num_attention_heads;
  info.kv_heads = config.num_key_value_heads;
  info.head_dim = config.head_dim;
  info.vocab = config.vocab_size;
  info.max_model_len = max_model_len;
  info.eos_token =
      config.eos_token_id >= 0 ? static_cast<uint32_t>(config.eos_token_id) : UINT32_MAX;
  return info;
}

}  // namespace headway::models::cpu
