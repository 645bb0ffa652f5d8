#include "headway/core/byte_tokenizer.h"

#include <headway/core/error.h>
#include <headway/core/input_file.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
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
    // Read in 64 bits and range-checked here: get<int32_t> narrowed silently (an added id
    // 2^32 + 5 read as 5, vocab_size 2^40 as 0) and offset + 255 overflowed (helper-151's
    // fuzzer). Ids are int32_t, so every token lies in [0, 2^31 - 1).
    constexpr int64_t kIdLimit = INT32_MAX;
    const auto integer = [&](const nlohmann::json& v, const std::string& field, int64_t low,
                             int64_t high) {
      // low >= 0: an unsigned value past INT64_MAX must not wrap through get<int64_t>.
      const bool in_range =
          v.is_number_unsigned()
              ? v.get<uint64_t>() >= uint64_t(low) && v.get<uint64_t>() <= uint64_t(high)
              : v.is_number_integer() && v.get<int64_t>() >= low && v.get<int64_t>() <= high;
      if (!in_range) {
        throw Error(where + ": " + field + " " + v.dump() + " is not an integer in [" +
                    std::to_string(low) + ", " + std::to_string(high) + "]");
      }
      return v.get<int64_t>();
    };
    const int64_t offset =
        model.contains("byte_offset")
            ? integer(model.at("byte_offset"), "model.byte_offset", 0, kIdLimit - 256)
            : 0;
    std::map<std::string, int32_t> specials;
    std::map<int32_t, std::string> special_text;
    int64_t highest = offset + 255;
    for (const auto& t : j.value("added_tokens", nlohmann::json::array())) {
      const int64_t id = integer(t.at("id"), "added token id", 0, kIdLimit - 1);
      if (id >= offset && id <= offset + 255) {
        throw Error(where + ": added token " + std::to_string(id) + " collides with the bytes");
      }
      specials[t.at("content").get<std::string>()] = static_cast<int32_t>(id);
      special_text[static_cast<int32_t>(id)] = t.at("content").get<std::string>();
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
    const int64_t vocab = j.contains("vocab_size") && !j.at("vocab_size").is_null()
                              ? integer(j.at("vocab_size"), "vocab_size", 1, kIdLimit)
                              : highest + 1;
    if (vocab < highest + 1) {
      throw Error(where + ": vocab_size " + std::to_string(vocab) + " does not cover token " +
                  std::to_string(highest));
    }
    return std::make_unique<ByteTokenizer>(static_cast<int32_t>(offset), special("bos_token"),
                                           special("eos_token"), static_cast<uint32_t>(vocab),
                                           std::move(special_text));
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
