// The one tokenizer factory (library headway_text). SentencePiece comes in through a hook so that
// this file, and every gRPC process that links it, stays free of libsentencepiece.
#include "headway/core/tokenizer.h"

#include <headway/core/bpe_tokenizer.h>
#include <headway/core/byte_tokenizer.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

namespace headway::core {
namespace {

Tokenizer::FileLoader& sentencepiece_loader() {
  static Tokenizer::FileLoader loader;  // function-local: safe from static initialisation order
  return loader;
}

// The model type of a parsed tokenizer.json ("HeadwayByte", "BPE", ...).
std::string model_type(const std::filesystem::path& file, const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    throw Error(file.string() + ": field 'model' is missing or not an object");
  }
  const nlohmann::json type = j["model"].value("type", nlohmann::json());
  if (!type.is_string()) throw Error(file.string() + ": field 'model.type' is missing");
  return type.get<std::string>();
}

}  // namespace

void Tokenizer::set_sentencepiece_loader(FileLoader loader) {
  sentencepiece_loader() = std::move(loader);
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  // tokenizer.json first, as vLLM reads it (Hugging Face's fast tokenizers), so that every process
  // of a deployment tokenizes alike; a checkpoint that ships both (Llama 2, Mistral) has a
  // SentencePiece-style one, which the BPE reader takes. Where tokenizer.json is refused and
  // SentencePiece is linked, tokenizer.model is used instead.
  const std::filesystem::path spm = dir / "tokenizer.model";
  const bool has_spm = std::filesystem::exists(spm);
  const std::filesystem::path json = dir / "tokenizer.json";
  if (std::filesystem::exists(json)) {
    try {
      const nlohmann::json parsed = read_json_file(json);
      const std::string type = model_type(json, parsed);
      if (type == "HeadwayByte") return ByteTokenizer::from_json_file(json);
      if (type == "BPE") return BpeTokenizer::load(dir, parsed);
      throw Error(json.string() + ": model.type '" + type +
                  "' is not supported (Headway reads \"BPE\" tokenizer.json files, byte-level "
                  "or SentencePiece-style, its own \"HeadwayByte\" ones and SentencePiece "
                  "tokenizer.model)");
    } catch (const Error& refused) {
      if (!has_spm || !sentencepiece_loader()) throw;
      // Said, not silent: a process without SentencePiece (serve) refuses this checkpoint.
      spdlog::warn("{}; reading {} instead", refused.what(), spm.string());
      try {
        return sentencepiece_loader()(spm);
      } catch (const Error& also) {
        throw Error(std::string(refused.what()) + "; and " + also.what());
      }
    }
  }
  if (has_spm && sentencepiece_loader()) return sentencepiece_loader()(spm);
  if (has_spm) {
    throw Error(spm.string() +
                ": tokenizer.model (SentencePiece) cannot be loaded in a process that also serves "
                "gRPC: Debian's libsentencepiece carries its own protobuf and crashes such a "
                "process; use a checkpoint with tokenizer.json");
  }
  std::error_code ignored;
  if (!std::filesystem::is_directory(dir, ignored)) {
    throw Error(dir.string() + (std::filesystem::exists(dir, ignored)
                                    ? ": not a directory (a tokenizer is read from a directory "
                                      "holding tokenizer.json or tokenizer.model)"
                                    : ": no such directory"));
  }
  throw Error(dir.string() +
              ": no tokenizer.json (byte-level BPE or Headway byte-level) or tokenizer.model "
              "(SentencePiece) in the checkpoint directory");
}

}  // namespace headway::core
