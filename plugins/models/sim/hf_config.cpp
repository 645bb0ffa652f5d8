#include "hf_config.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace headway::models::sim {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw std::invalid_argument(file.string() + ": " + what);
}

// A positive integer that fits the shape's 32-bit fields.
uint32_t positive(const json& config, const std::filesystem::path& file, const char* key) {
  const json& value = config.at(key);
  if (!value.is_number_integer()) {
    fail(file, std::string("key \"") + key + "\" must be an integer (got " + value.dump() + ")");
  }
  const int64_t n = value.get<int64_t>();
  if (n <= 0 || n > int64_t{UINT32_MAX}) {
    fail(file, std::string("key \"") + key + "\" must be in [1, 4294967295] (got " +
                   std::to_string(n) + ")");
  }
  return static_cast<uint32_t>(n);
}

uint32_t required(const json& config, const std::filesystem::path& file, const char* key) {
  if (!config.contains(key)) fail(file, std::string("missing required key \"") + key + "\"");
  return positive(config, file, key);
}

uint32_t optional(const json& config, const std::filesystem::path& file, const char* key,
                  uint32_t fallback) {
  if (!config.contains(key) || config.at(key).is_null()) return fallback;
  return positive(config, file, key);
}

}  // namespace

ModelShape parse_hf_config(std::string_view json_text, const std::filesystem::path& file) {
  json config;
  try {
    config = json::parse(json_text);
  } catch (const json::parse_error& e) {
    fail(file, std::string("not valid JSON: ") + e.what());
  }
  if (!config.is_object()) fail(file, "expected a JSON object at the top level");
  for (const char* moe : {"num_local_experts", "n_routed_experts", "num_experts"}) {
    if (config.contains(moe) && !config.at(moe).is_null()) {
      fail(file, std::string("key \"") + moe +
                     "\": mixture-of-experts models are not supported (the memory and cost "
                     "models are for dense Llama-style transformers)");
    }
  }

  ModelShape shape;
  shape.layers = required(config, file, "num_hidden_layers");
  shape.hidden = required(config, file, "hidden_size");
  shape.heads = required(config, file, "num_attention_heads");
  shape.intermediate = required(config, file, "intermediate_size");
  shape.vocab = required(config, file, "vocab_size");
  shape.kv_heads = optional(config, file, "num_key_value_heads", shape.heads);
  if (!config.contains("head_dim") && shape.hidden % shape.heads != 0) {
    fail(file, "no key \"head_dim\", and hidden_size=" + std::to_string(shape.hidden) +
                   " is not a multiple of num_attention_heads=" + std::to_string(shape.heads));
  }
  shape.head_dim = optional(config, file, "head_dim", shape.hidden / shape.heads);
  shape.max_model_len = optional(config, file, "max_position_embeddings", 0);
  if (shape.heads % shape.kv_heads != 0) {
    fail(file, "key \"num_key_value_heads\"=" + std::to_string(shape.kv_heads) +
                   " must divide num_attention_heads=" + std::to_string(shape.heads));
  }
  if (config.contains("tie_word_embeddings")) {
    const json& tied = config.at("tie_word_embeddings");
    if (!tied.is_boolean()) {
      fail(file, "key \"tie_word_embeddings\" must be true or false (got " + tied.dump() + ")");
    }
    shape.tied_embeddings = tied.get<bool>();
  }
  return shape;
}

ModelShape load_hf_config(const std::filesystem::path& file) {
  std::error_code error;
  if (std::filesystem::is_directory(file, error)) {
    fail(file, "is a directory; give the model's config.json in it");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, "cannot open the file (a Hugging Face config.json was expected)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(file, "read error");
  return parse_hf_config(text.str(), file);
}

}  // namespace headway::models::sim
