#include "hf_config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <headway/sdk/json_depth.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <system_error>

namespace headway::models::sim {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw std::invalid_argument(file.string() + ": " + what);
}

// A positive integer of at most `most`. The bounds are far above any released model's
// (Llama-3.1-405B: 126 layers, hidden 16,384, 128 heads, FFN 53,248) and keep every product of
// the memory model within 64 bits.
uint32_t positive(const json& config, const std::filesystem::path& file, const char* key,
                  uint64_t most) {
  json value = config.at(key);
  // transformers and vLLM take 4096.0 for 4096.
  if (value.is_number_float() && std::isfinite(value.get<double>()) &&
      value.get<double>() == std::floor(value.get<double>()) && value.get<double>() >= 0 &&
      value.get<double>() <= static_cast<double>(most)) {
    value = static_cast<uint64_t>(value.get<double>());
  }
  if (!value.is_number_integer()) {
    fail(file,
         std::string("key \"") + key + "\" must be an integer (got " + config.at(key).dump() + ")");
  }
  const bool in_range =
      value.is_number_unsigned()
          ? value.get<uint64_t>() <= most
          : value.get<int64_t>() > 0 && static_cast<uint64_t>(value.get<int64_t>()) <= most;
  if (!in_range || (value.is_number_unsigned() && value.get<uint64_t>() == 0)) {
    fail(file, std::string("key \"") + key + "\" must be in [1, " + std::to_string(most) +
                   "] (got " + value.dump() + ")");
  }
  return static_cast<uint32_t>(value.get<uint64_t>());
}

constexpr uint64_t kMostLayers = 4096;
constexpr uint64_t kMostWidth = 1u << 20;  // hidden_size, intermediate_size
constexpr uint64_t kMostHeads = 4096;      // heads, kv heads, head_dim
constexpr uint64_t kMostVocab = 1u << 24;
constexpr uint64_t kMostPositions = UINT32_MAX;

uint32_t required(const json& config, const std::filesystem::path& file, const char* key,
                  uint64_t most) {
  if (!config.contains(key)) {
    fail(file, std::string("missing required key \"") + key + "\"");
  }
  return positive(config, file, key, most);
}

uint32_t optional(const json& config, const std::filesystem::path& file, const char* key,
                  uint64_t most, uint32_t fallback) {
  if (!config.contains(key) || config.at(key).is_null()) return fallback;
  return positive(config, file, key, most);
}

bool present(const json& config, const char* key) {
  return config.contains(key) && !config.at(key).is_null();
}

// The families the memory model describes (dense, GQA attention, gated MLP, untied unless the
// family ties by default), with transformers' default of tie_word_embeddings for each.
struct Family {
  const char* model_type;
  bool ties_embeddings;
};
constexpr Family kFamilies[] = {{"llama", false}, {"mistral", false},   {"qwen2", false},
                                {"qwen3", false}, {"phi3", false},      {"gemma", true},
                                {"gemma2", true}, {"gemma3_text", true}};

std::string family_names() {
  std::string names;
  for (const Family& f : kFamilies)
    names += (names.empty() ? "" : ", ") + std::string(f.model_type);
  return names;
}

// Refuses what the memory model does not describe, by the key that shows it.
void refuse_other_architectures(const json& config, const std::filesystem::path& file) {
  for (const char* moe : {"num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts",
                          "num_experts_per_tok", "moe_k", "moe_intermediate_size"}) {
    if (present(config, moe)) {
      fail(file, std::string("key \"") + moe +
                     "\": mixture-of-experts models are not supported (the memory and cost "
                     "models are for dense Llama-style transformers)");
    }
  }
  for (const char* latent :
       {"kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
    if (present(config, latent)) {
      fail(file, std::string("key \"") + latent +
                     "\": multi-head latent attention (MLA) is not supported: its KV cache and "
                     "projections are not those of GQA attention");
    }
  }
}

// tie_word_embeddings' default for this config's model_type; refuses a model_type not described.
bool family_ties_embeddings(const json& config, const std::filesystem::path& file) {
  if (!present(config, "model_type")) return false;  // taken as Llama-style, as before model_type
  const json& type = config.at("model_type");
  if (!type.is_string()) {
    fail(file, "key \"model_type\" must be a string (got " + type.dump() + ")");
  }
  for (const Family& f : kFamilies) {
    if (type.get<std::string>() == f.model_type) return f.ties_embeddings;
  }
  fail(file, "key \"model_type\" is " + type.dump() +
                 ", not a family the planner describes (dense Llama-style transformers with GQA "
                 "attention and a gated MLP: " +
                 family_names() + "); its parameters and KV cache would be counted wrongly");
}

// max_position_embeddings raised by a rope scaling that extends the context, as vLLM derives its
// max_model_len: yarn from original_max_position_embeddings, linear and dynamic from
// max_position_embeddings, times the factor. llama3, longrope and the rest do not change it.
void apply_rope_scaling(const json& config, const std::filesystem::path& file, HfModel& model) {
  if (!present(config, "rope_scaling") || model.shape.max_model_len == 0) return;
  const json& scaling = config.at("rope_scaling");
  if (!scaling.is_object()) return;
  const char* type_key = scaling.contains("rope_type") ? "rope_type" : "type";
  if (!scaling.contains(type_key) || !scaling.at(type_key).is_string()) return;
  const std::string type = scaling.at(type_key).get<std::string>();
  if (type != "yarn" && type != "linear" && type != "dynamic") return;
  const json& factor = scaling.contains("factor") ? scaling.at("factor") : json();
  if (!factor.is_number() || !(factor.get<double>() > 0.0) ||
      !std::isfinite(factor.get<double>())) {
    fail(file, "key \"rope_scaling\": a " + type + " scaling needs a \"factor\" > 0 (got " +
                   factor.dump() + ")");
  }
  uint64_t base = model.shape.max_model_len;
  std::string base_key = "max_position_embeddings";
  if (type == "yarn" && scaling.contains("original_max_position_embeddings")) {
    base = positive(scaling, file, "original_max_position_embeddings", kMostPositions);
    base_key = "original_max_position_embeddings";
  }
  // A factor below 1 shrinks it, as vLLM's does.
  const double scaled = std::floor(static_cast<double>(base) * factor.get<double>());
  model.shape.max_model_len =
      static_cast<uint32_t>(std::clamp(scaled, 1.0, static_cast<double>(UINT32_MAX)));
  model.max_len_source = file.string() + ": key \"rope_scaling\" (" + type + ", factor " +
                         factor.dump() + " over " + base_key + " " + std::to_string(base) + ")";
}

void note_what_the_plan_ignores(const json& config, HfModel& model) {
  // Qwen2-style configs name a window they do not use (use_sliding_window: false).
  const bool slides = !config.contains("use_sliding_window") ||
                      !config.at("use_sliding_window").is_boolean() ||
                      config.at("use_sliding_window").get<bool>();
  // Only a note depends on it: a value that is not a positive integer is left out.
  const json window = present(config, "sliding_window") ? config.at("sliding_window") : json();
  if (slides && window.is_number_integer() && window.get<int64_t>() > 0 &&
      window.get<uint64_t>() <= kMostPositions) {
    model.sliding_window = window.get<uint32_t>();
  }
  if (present(config, "quantization_config")) {
    const json& q = config.at("quantization_config");
    std::string method = "?";
    if (q.is_object() && q.contains("quant_method") && q.at("quant_method").is_string()) {
      method = q.at("quant_method").get<std::string>();
    }
    std::string bits;
    if (q.is_object() && q.contains("bits") && q.at("bits").is_number_integer()) {
      bits = ", " + std::to_string(q.at("bits").get<int64_t>()) + "-bit";
    }
    model.notes.push_back("quantization_config (quant_method \"" + method + "\"" + bits +
                          ") is not read: the weights are counted as --dtype says (an FP8 "
                          "checkpoint is --dtype fp8; 4-bit weights take about half of that)");
  }
}

}  // namespace

HfModel parse_hf_config(std::string_view json_text, const std::filesystem::path& file) {
  if (const size_t nul = json_text.find('\0'); nul != std::string_view::npos) {
    fail(file, "holds a NUL byte at offset " + std::to_string(nul) + ": not a JSON text file");
  }
  // Before parsing: a value nested a million levels deep overflows the stack when read (a copy).
  if (const std::string problem = headway::sdk::json_depth_problem(json_text); !problem.empty()) {
    fail(file, "not valid JSON: " + problem);
  }
  json config;
  try {
    config = json::parse(json_text);
  } catch (const json::exception& e) {  // out_of_range too: a number past a double's (1e400)
    fail(file, std::string("not valid JSON: ") + e.what());
  }
  if (!config.is_object()) fail(file, "expected a JSON object at the top level");
  if (config.contains("text_config") && config.at("text_config").is_object() &&
      !config.contains("num_hidden_layers")) {
    fail(file,
         "the model's shape is under \"text_config\" (a multimodal model's config), which the "
         "planner does not read; its vision tower and any mixture of experts would not be counted "
         "either");
  }
  refuse_other_architectures(config, file);
  const bool ties_by_default = family_ties_embeddings(config, file);

  HfModel model;
  ModelShape& shape = model.shape;
  shape.layers = required(config, file, "num_hidden_layers", kMostLayers);
  shape.hidden = required(config, file, "hidden_size", kMostWidth);
  shape.heads = required(config, file, "num_attention_heads", kMostHeads);
  shape.intermediate = required(config, file, "intermediate_size", kMostWidth);
  shape.vocab = required(config, file, "vocab_size", kMostVocab);
  shape.kv_heads = optional(config, file, "num_key_value_heads", kMostHeads, shape.heads);
  if (!present(config, "head_dim") && shape.hidden % shape.heads != 0) {
    fail(file, "no key \"head_dim\", and hidden_size=" + std::to_string(shape.hidden) +
                   " is not a multiple of num_attention_heads=" + std::to_string(shape.heads));
  }
  shape.head_dim = optional(config, file, "head_dim", kMostHeads, shape.hidden / shape.heads);
  shape.max_model_len = optional(config, file, "max_position_embeddings", kMostPositions, 0);
  model.max_len_source = file.string() + ": key \"max_position_embeddings\"";
  if (shape.heads % shape.kv_heads != 0) {
    fail(file, "key \"num_key_value_heads\"=" + std::to_string(shape.kv_heads) +
                   " must divide num_attention_heads=" + std::to_string(shape.heads));
  }
  shape.tied_embeddings = ties_by_default;
  if (config.contains("tie_word_embeddings")) {
    const json& tied = config.at("tie_word_embeddings");
    if (!tied.is_boolean()) {
      fail(file, "key \"tie_word_embeddings\" must be true or false (got " + tied.dump() + ")");
    }
    shape.tied_embeddings = tied.get<bool>();
  }
  apply_rope_scaling(config, file, model);
  note_what_the_plan_ignores(config, model);
  return model;
}

HfModel load_hf_config(const std::filesystem::path& file) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(file, error);
  if (error || status.type() == std::filesystem::file_type::not_found) {
    fail(file,
         "cannot open the file: " + (error ? error.message() : std::string(std::strerror(ENOENT))) +
             " (a Hugging Face config.json was expected)");
  }
  if (std::filesystem::is_directory(status)) {
    fail(file, "is a directory; give the model's config.json in it");
  }
  if (!std::filesystem::is_regular_file(status)) {
    fail(file,
         "is not a regular file (a device, a pipe or a socket?); give the model's config.json");
  }
  const uintmax_t bytes = std::filesystem::file_size(file, error);
  if (!error && bytes > kMaxConfigBytes) {
    fail(file, "holds " + std::to_string(bytes) + " bytes; a config.json holds a few KB (at most " +
                   std::to_string(kMaxConfigBytes) + " are read)");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    fail(file, std::string("cannot open the file: ") + std::strerror(errno) +
                   " (a Hugging Face config.json was expected)");
  }
  // At most one byte past the bound: /proc files and growing ones report no size or the wrong one.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) fail(file, "read error");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    fail(file, "holds more than " + std::to_string(kMaxConfigBytes) +
                   " bytes; a config.json holds a few KB");
  }
  return parse_hf_config(text, file);
}

}  // namespace headway::models::sim
