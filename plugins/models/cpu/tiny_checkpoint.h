// The built-in model: a deterministic random-weight Llama checkpoint in exactly the Hugging Face
// format the cpu model plugin loads (config.json + model.safetensors + a byte-level
// tokenizer.json), so that Headway serves a real forward pass with no download.
//
// Threading: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "safetensors.h"

namespace headway::models::cpu {

// The default shape is chosen on this project's 2-core reference machine so that head-of-line
// blocking is visible: a 4k-token prefill takes seconds, a 64-token one tens of milliseconds (see
// docs/cpu_model.md for the measurements). It is the 56M-parameter benchmark shape of issue 4 with
// the byte-level vocabulary instead of 32000 tokens.
struct TinyModelSpec {
  uint32_t layers = 8;
  uint32_t hidden = 512;
  uint32_t heads = 8;
  uint32_t kv_heads = 4;
  uint32_t ffn = 1408;
  // 256 bytes + <s>, </s>, <pad>, padded to a multiple of 64 (ids 259..319 are never produced by
  // the tokenizer and decode to nothing).
  uint32_t vocab = 320;
  uint32_t max_position_embeddings = 16384;
  uint64_t seed = 0;
  DType dtype = DType::kF16;
  bool tie_word_embeddings = false;
  bool llama3_rope_scaling = true;  // llama only: Qwen checkpoints have no rope_scaling
  // The config.json and tensors of: "llama"; "qwen2" (biases on q, k and v); "qwen3" (q and k
  // RMS-normalized per head).
  std::string architecture = "llama";
  // Biases on q, k, v and o (config attention_bias; llama and qwen3), as some Llama derivatives.
  bool attention_bias = false;
  // The heads' width when it is not hidden / heads (Qwen 3: 16 heads of 128 over a hidden 1024);
  // 0: hidden / heads.
  uint32_t head_dim = 0;
};

// Byte-level tokenizer ids written by make-tiny (see core/include/headway/core/byte_tokenizer.h).
inline constexpr int32_t kTinyBosToken = 256;
inline constexpr int32_t kTinyEosToken = 257;
inline constexpr int32_t kTinyPadToken = 258;
inline constexpr uint32_t kTinyMinVocab = 259;

// Checks the spec; throws sdk::Error(HW_INVALID_ARGUMENT) naming the offending field.
void validate(const TinyModelSpec& spec);

// Parameter count of the spec (embeddings and LM head included).
uint64_t parameter_count(const TinyModelSpec& spec);

// Writes config.json, model.safetensors and tokenizer.json into `dir` (created if missing). The
// same spec always gives byte-identical files. Throws sdk::Error on an invalid spec or I/O failure.
void write_tiny_checkpoint(const TinyModelSpec& spec, const std::filesystem::path& dir);

}  // namespace headway::models::cpu
