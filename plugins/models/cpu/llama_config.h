// The architecture of a Hugging Face Llama-family checkpoint (Llama, Mistral, Qwen 2, Qwen 3), read
// from its config.json.
//
// Threading: plain data; load_llama_config is reentrant.
#pragma once

#include <headway/abi.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace headway::models::cpu {

// rope_scaling of type "llama3" (Llama 3.1+): low frequencies are divided by `factor`, high ones
// kept, and the band in between interpolated.
struct RopeScaling {
  bool llama3 = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

struct LlamaConfig {
  uint32_t hidden_size = 0;
  uint32_t intermediate_size = 0;
  uint32_t num_hidden_layers = 0;
  uint32_t num_attention_heads = 0;
  uint32_t num_key_value_heads = 0;
  uint32_t head_dim = 0;  // hidden_size / num_attention_heads unless config.json says otherwise
  uint32_t vocab_size = 0;
  uint32_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  int64_t bos_token_id = -1;  // -1: none
  int64_t eos_token_id = -1;  // -1: none; the first one when config.json lists several
  std::string torch_dtype;    // "float32", "float16", "bfloat16" or empty
  std::string model_type;     // "llama", "mistral", "qwen2" or "qwen3" (required in config.json)
  bool qkv_bias = false;      // q_proj, k_proj and v_proj have biases (Qwen 2; attention_bias)
  bool o_bias = false;        // o_proj has a bias too (attention_bias)
  bool qk_norm = false;       // q and k are RMS-normalized per head before RoPE (Qwen 3)
  uint32_t sliding_window =
      0;  // Mistral's window on every layer, which bounds the context; 0: none
};

// Reads and checks <dir>/config.json. Throws sdk::Error(HW_INVALID_ARGUMENT) naming the file and
// the key on a missing file, bad JSON, a missing or out-of-range key, an unsupported architecture
// or an unsupported rope_scaling type.
LlamaConfig load_llama_config(const std::filesystem::path& dir);

// Same, from JSON text; `file` is used for messages.
LlamaConfig parse_llama_config(const std::string& text, const std::string& file);

// The context a model plugin serves: `asked` (its max_model_len option) when positive, else the
// checkpoint's max_position_embeddings, bounded by a sliding window (within which full attention is
// exact). Throws sdk::Error(HW_INVALID_ARGUMENT), prefixed with `who`, for a length past the
// window.
uint32_t resolve_max_model_len(const LlamaConfig& config, int64_t asked, const std::string& who);

// The part of a model plugin's info() that the config determines (struct_size, shape, vocab,
// max_model_len, eos_token); every model of this architecture (CPU, CUDA) fills the rest: KV
// bytes and capacity, and the contract flags.
hw_model_info model_info_of(const LlamaConfig& config, uint32_t max_model_len);

}  // namespace headway::models::cpu
