#include "headway/core/bpe_tokenizer.h"

#include <headway/core/error.h>
#include <headway/core/input_file.h>

#include <cstring>

#include "bpe_tables.h"
#include "byte_level_alphabet.h"
#include "unicode_nfc.h"

namespace headway::core {
namespace {

// The added token that starts at text[pos], the longest when several do; nullptr when none.
const AddedToken* added_token_at(const BpeTokenizer::Tables& t, std::string_view text, size_t pos) {
  for (const AddedToken& token : t.added_by_first_byte[static_cast<uint8_t>(text[pos])]) {
    if (token.content.size() <= text.size() - pos &&
        std::memcmp(text.data() + pos, token.content.data(), token.content.size()) == 0) {
      return &token;
    }
  }
  return nullptr;
}

void encode_word(const BpeTokenizer::Tables& t, std::string_view piece, std::vector<int32_t>& ids) {
  if (t.ignore_merges) {
    const auto it = t.vocab.find(byte_level::encode(piece));
    if (it != t.vocab.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) symbols[i] = t.byte_ids[static_cast<uint8_t>(piece[i])];
  const std::vector<int32_t> merged = t.merges.apply(symbols);
  ids.insert(ids.end(), merged.begin(), merged.end());
}

// Pre-tokenizes one stretch of text without added tokens and appends its ids.
void encode_segment(const BpeTokenizer::Tables& t, std::string_view segment,
                    std::vector<int32_t>& ids) {
  if (segment.empty()) return;
  std::string normalized;
  if (t.nfc) {
    normalized = to_nfc(segment);
    segment = normalized;
  }
  std::string prefixed;
  if (t.add_prefix_space && !segment.empty() && segment.front() != ' ') {
    prefixed = " " + std::string(segment);
    segment = prefixed;
  }
  std::vector<std::string_view> pieces{segment};
  std::vector<std::string_view> next;
  for (const auto& splitter : t.splitters) {
    next.clear();
    for (std::string_view piece : pieces) splitter->split(piece, next);
    pieces.swap(next);
  }
  for (std::string_view piece : pieces) encode_word(t, piece, ids);
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::unique_ptr<const Tables> tables) : tables_(std::move(tables)) {}
BpeTokenizer::~BpeTokenizer() = default;

std::unique_ptr<BpeTokenizer> BpeTokenizer::load(const std::filesystem::path& checkpoint_dir) {
  const std::filesystem::path file = checkpoint_dir / "tokenizer.json";
  return load(checkpoint_dir, read_json_file(file));
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::load(const std::filesystem::path& checkpoint_dir,
                                                 const nlohmann::json& tokenizer_json) {
  return std::unique_ptr<BpeTokenizer>(
      new BpeTokenizer(load_bpe_tables(checkpoint_dir, tokenizer_json)));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  const Tables& t = *tables_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  size_t segment_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (const AddedToken* token = added_token_at(t, text, pos)) {
      encode_segment(t, text.substr(segment_start, pos - segment_start), ids);
      ids.push_back(token->id);
      pos += token->content.size();
      segment_start = pos;
    } else {
      ++pos;
    }
  }
  encode_segment(t, text.substr(segment_start), ids);
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  const Tables& t = *tables_;
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= t.bytes_of.size() || t.special[id]) continue;
    text += t.bytes_of[id];
  }
  return text;
}

std::string BpeTokenizer::decode_with_special_tokens(std::span<const int32_t> ids) const {
  const Tables& t = *tables_;
  std::string text;
  for (int32_t id : ids) {
    // An added token's bytes are its content, special or not.
    if (id >= 0 && static_cast<size_t>(id) < t.bytes_of.size()) text += t.bytes_of[id];
  }
  return text;
}

int32_t BpeTokenizer::bos() const { return tables_->bos; }
int32_t BpeTokenizer::eos() const { return tables_->eos; }
uint32_t BpeTokenizer::vocab_size() const { return tables_->vocab_size; }

std::string BpeTokenizer::special_token_text(int32_t id) const {
  const auto it = tables_->added_text.find(id);
  return it == tables_->added_text.end() ? std::string() : it->second;
}

}  // namespace headway::core
