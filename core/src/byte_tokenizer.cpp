#include "headway/core/byte_tokenizer.h"

#include <headway/core/error.h>
#include <headway/core/input_file.h>

#include <nlohmann/json.hpp>
#include <utility>

namespace headway::core {

ByteTokenizer::ByteTokenizer(int32_t byte_offset, int32_t bos, int32_t eos, uint32_t vocab_size,
                             std::map<int32_t, std::string> special_text)
    : byte_offset_(byte_offset),
      bos_(bos),
      eos_(eos),
      vocab_size_(vocab_size),
      special_text_(std::move(special_text)) {}

std::unique_ptr<ByteTokenizer> ByteTokenizer::from_json_file(const std::filesystem::path& file) {
  const std::string where = file.string();
  const nlohmann::json j = read_json_file(file);
  try {
    const nlohmann::json& model = j.at("model");
    const std::string type = model.at("type").get<std::string>();
    if (type != "HeadwayByte") {
      throw Error(where + ": tokenizer type '" + type +
                  "' is not a HeadwayByte tokenizer (Headway reads byte-level BPE and HeadwayByte "
                  "tokenizer.json files and SentencePiece tokenizer.model)");
    }
    const int32_t offset = model.value("byte_offset", 0);
    std::map<std::string, int32_t> specials;
    std::map<int32_t, std::string> special_text;
    int32_t highest = offset + 255;
    for (const auto& t : j.value("added_tokens", nlohmann::json::array())) {
      const int32_t id = t.at("id").get<int32_t>();
      if (id >= offset && id <= offset + 255) {
        throw Error(where + ": added token " + std::to_string(id) + " collides with the bytes");
      }
      specials[t.at("content").get<std::string>()] = id;
      special_text[id] = t.at("content").get<std::string>();
      highest = std::max(highest, id);
    }
    const auto special = [&](const char* key) {
      if (!j.contains(key) || j[key].is_null()) return -1;
      const std::string name = j[key].get<std::string>();
      auto it = specials.find(name);
      if (it == specials.end()) {
        throw Error(where + ": " + key + " '" + name + "' is not among added_tokens");
      }
      return it->second;
    };
    const uint32_t vocab = j.value("vocab_size", static_cast<uint32_t>(highest + 1));
    if (offset < 0 || vocab < static_cast<uint32_t>(highest + 1)) {
      throw Error(where + ": vocab_size " + std::to_string(vocab) + " does not cover token " +
                  std::to_string(highest));
    }
    return std::make_unique<ByteTokenizer>(offset, special("bos_token"), special("eos_token"),
                                           vocab, std::move(special_text));
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": malformed tokenizer: " + e.what());
  }
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    ids[i] = byte_offset_ + static_cast<unsigned char>(text[i]);
  }
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    const int32_t b = id - byte_offset_;
    if (b >= 0 && b < 256) text.push_back(static_cast<char>(b));
  }
  return text;
}

std::string ByteTokenizer::decode_with_special_tokens(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    const int32_t b = id - byte_offset_;
    if (b >= 0 && b < 256) {
      text.push_back(static_cast<char>(b));
    } else if (const auto it = special_text_.find(id); it != special_text_.end()) {
      text += it->second;
    }
  }
  return text;
}

}  // namespace headway::core
