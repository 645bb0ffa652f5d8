// Reads the shape of a dense Llama-style model from a Hugging Face config.json, for
// `headway plan --model path/to/config.json`.
//
// Keys read (as transformers names them): num_hidden_layers, hidden_size, num_attention_heads,
// intermediate_size, vocab_size (required); num_key_value_heads (default num_attention_heads),
// head_dim (default hidden_size / num_attention_heads), max_position_embeddings (default 0 =
// unknown) and rope_scaling (yarn, linear and dynamic scaling scale the maximum by their factor
// as vLLM does; where vLLM refuses — no type, yarn without original_max_position_embeddings — it
// is taken as no scaling and as scaling max_position_embeddings),
// tie_word_embeddings (default: the model type's, true for Gemma), model_type.
//
// A silently wrong plan is worse than a refusal, so whatever the memory model does not describe is
// refused by name: a model_type other than the gated-MLP Llama-style families it does describe
// (llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, gemma3_text; a config without model_type is
// taken as one), mixture-of-experts keys, multi-head latent attention (its compressed KV), a
// multimodal config whose text model sits under text_config. What it counts pessimistically or
// ignores comes back as notes: a sliding window (KV counted for full attention), a
// quantization_config (weights counted as --dtype).
//
// Threading: pure functions of the file; safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "model_memory.h"

namespace headway::models::sim {

struct HfModel {
  ModelShape shape;
  // Where shape.max_model_len came from, for the context check's message.
  std::string max_len_source;
  // The attention window of sliding-window layers (0: none), which the plan does not use: KV is
  // counted for full attention on every layer.
  uint32_t sliding_window = 0;
  // What the plan does not take into account, each a sentence for the operator.
  std::vector<std::string> notes;
};

// The most a config.json may hold: real ones are a few KB.
inline constexpr uintmax_t kMaxConfigBytes = 16u << 20;

// Throws std::invalid_argument whose message starts with the file's path and names the key on a
// missing or unreadable file, one that is not a regular file or is larger than kMaxConfigBytes,
// a JSON syntax error (with its byte offset), a missing required key, a key of the wrong type or
// out of range, an inconsistent shape (kv heads that do not divide the query heads), or a model the
// memory model does not describe (above).
HfModel load_hf_config(const std::filesystem::path& file);

// The same from JSON text in memory; `file` names it in messages.
HfModel parse_hf_config(std::string_view json_text, const std::filesystem::path& file);

}  // namespace headway::models::sim
