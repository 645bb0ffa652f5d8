// Reads the shape of a dense Llama-style model from a Hugging Face config.json, for
// `headway plan --model path/to/config.json`.
//
// Keys read (as transformers names them): num_hidden_layers, hidden_size, num_attention_heads,
// intermediate_size, vocab_size (required); num_key_value_heads (default num_attention_heads),
// head_dim (default hidden_size / num_attention_heads), max_position_embeddings (default 0 =
// unknown), tie_word_embeddings (default false). Mixture-of-experts configs (num_local_experts,
// n_routed_experts, num_experts) are refused: the memory model is for dense models.
//
// Threading: a pure function of the file; safe from any thread.
#pragma once

#include <filesystem>
#include <string_view>

#include "model_memory.h"

namespace headway::models::sim {

// Throws std::invalid_argument whose message starts with the file's path and names the key on a
// missing or unreadable file, a JSON syntax error (with its byte offset), a missing required key,
// a key of the wrong type or out of range, or an inconsistent shape (head_dim that does not
// follow from hidden_size, kv heads that do not divide the query heads).
ModelShape load_hf_config(const std::filesystem::path& file);

// The same from JSON text in memory; `file` names it in messages.
ModelShape parse_hf_config(std::string_view json_text, const std::filesystem::path& file);

}  // namespace headway::models::sim
