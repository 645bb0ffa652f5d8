// A tiny Hugging Face byte-level BPE checkpoint written by the tests (no download possible): the
// 256 byte symbols with id == byte value, then one token per merge (id 256 + merge index), then the
// Llama 3 special tokens. Merges are given in the byte-level alphabet (a space is "Ġ", U+0120),
// spelled out by hand so the expected ids do not come from the code under test.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace headway::serving::testing {

// Llama 3's pre-tokenizer pattern, verbatim from Meta-Llama-3-8B's tokenizer.json.
extern const char* const kLlama3Pattern;

struct TinyBpe {
  std::vector<std::pair<std::string, std::string>> merges;
  bool merges_as_pairs = false;  // ["a", "b"] instead of "a b"
  // pre_tokenizer: Llama 3 style (Split + ByteLevel without regex) unless replaced.
  nlohmann::json pre_tokenizer;
  bool ignore_merges = false;
  std::vector<std::string> extra_vocab;  // whole tokens with no merge path (for ignore_merges)
  bool write_tokenizer_config = true;    // bos/eos names
  nlohmann::json chat_template;          // written into tokenizer_config.json unless null
};

// Ids of the special tokens, after the bytes and up to 64 merges / extra tokens.
inline constexpr int32_t kBeginOfText = 1000;
inline constexpr int32_t kEndOfText = 1001;
inline constexpr int32_t kStartHeader = 1002;
inline constexpr int32_t kEndHeader = 1003;
inline constexpr int32_t kEotId = 1004;

nlohmann::json tiny_bpe_json(const TinyBpe& spec);
// One entry of tokenizer.json's added_tokens.
nlohmann::json added_token_json(int32_t id, const std::string& content, bool special,
                                bool normalized);

// A SentencePiece-style tokenizer.json as Llama 2 ships it: <unk>, <s>, </s>, the 256 byte tokens
// <0x00>..<0xFF> (ids 3 to 258), then characters ('▁' 259, H 260, i 261) and the merges ▁ H (265
// "▁H") and ▁H i (266 "▁Hi"); a Prepend + Replace normalizer and the Replace, ByteFallback, Fuse,
// Strip decoder.
nlohmann::json tiny_sentencepiece_bpe_json();
inline const std::string kMeta = "\xE2\x96\x81";  // '▁' U+2581
// Writes tokenizer.json (and tokenizer_config.json) into `dir`.
void write_tiny_bpe(const std::filesystem::path& dir, const TinyBpe& spec);
void write_text(const std::filesystem::path& file, const std::string& text);

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace headway::serving::testing
