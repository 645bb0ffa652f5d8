#include "headway/core/bpe_tokenizer.h"

#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <headway/core/utf8.h>

#include <algorithm>
#include <cstring>

#include "bpe_tables.h"
#include "byte_level_alphabet.h"
#include "text_steps.h"

namespace headway::core {
namespace {

// Calls on_stretch(text, at_start) for each stretch of `text` between the added tokens of `index`
// (leftmost first, the longest where several start at one place; `at_start`: the stretch begins
// `text`) and appends each token's id to `ids`.
template <class OnStretch>
void split_at_added_tokens(const AddedTokenIndex& index, std::string_view text,
                           std::vector<int32_t>& ids, OnStretch on_stretch) {
  size_t stretch_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (const AddedToken* token = index.at(text, pos)) {
      on_stretch(text.substr(stretch_start, pos - stretch_start), stretch_start == 0);
      ids.push_back(token->id);
      pos += token->content.size();
      stretch_start = pos;
    } else {
      ++pos;
    }
  }
  on_stretch(text.substr(stretch_start), stretch_start == 0);
}

// SentencePiece-style BPE: the word's characters (or their <0xXX> tokens, or the unknown token),
// merged.
void encode_characters(const BpeTokenizer::Tables& t, std::string_view word,
                       std::vector<int32_t>& ids) {
  if (t.ignore_merges) {
    if (const auto it = t.vocab.find(std::string(word)); it != t.vocab.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  bool after_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    // A byte that starts no valid character is no character of the vocabulary's: it falls back
    // alone.
    const size_t length = utf8::complete_length(word.substr(pos));
    const std::string_view c = word.substr(pos, std::max<size_t>(length, 1));
    pos += c.size();
    if (const auto it =
            length > 0 ? t.character_ids.find(utf8::first_code_point(c)) : t.character_ids.end();
        it != t.character_ids.end()) {
      symbols.push_back(it->second);
      after_unk = false;
    } else if (t.byte_fallback) {
      for (const char byte : c) symbols.push_back(t.fallback_ids[static_cast<uint8_t>(byte)]);
      after_unk = false;
    } else if (!(t.fuse_unk && after_unk)) {
      symbols.push_back(t.unk);
      after_unk = true;
    }
  }
  const std::vector<int32_t> merged = t.merges.apply(symbols);
  ids.insert(ids.end(), merged.begin(), merged.end());
}

// Applies splitters [first, last) to every piece of `pieces`, in place.
void apply_splitters(const BpeTokenizer::Tables& t, size_t first, size_t last,
                     std::vector<std::string_view>& pieces) {
  std::vector<std::string_view> next;
  for (size_t k = first; k < last; ++k) {
    next.clear();
    for (std::string_view piece : pieces) t.splitters[k]->split(piece, next);
    pieces.swap(next);
  }
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

// Pre-tokenizes one normalized stretch of text without added tokens and appends its ids.
// `at_start`: the stretch begins the text (Metaspace's "first" prepend scheme asks).
void encode_stretch(const BpeTokenizer::Tables& t, std::string_view stretch, bool at_start,
                    std::vector<int32_t>& ids) {
  if (stretch.empty()) return;
  if (t.characters) {
    if (!t.metaspace_words) {
      encode_characters(t, stretch, ids);
      return;
    }
    std::string storage;
    std::vector<std::string_view> words;
    metaspace_words(t.metaspace, stretch, at_start, storage, words);
    for (std::string_view word : words) encode_characters(t, word, ids);
    return;
  }
  std::vector<std::string_view> pieces{stretch};
  if (!t.add_prefix_space) {
    apply_splitters(t, 0, t.splitters.size(), pieces);
    for (std::string_view word : pieces) encode_word(t, word, ids);
    return;
  }
  apply_splitters(t, 0, t.prefix_after_splitters, pieces);
  std::string prefixed;
  std::vector<std::string_view> words;
  for (std::string_view piece : pieces) {
    // As ByteLevel does to every piece the steps before it made (the whole stretch when it is the
    // only step).
    if (!piece.empty() && piece.front() != ' ') {
      prefixed.assign(1, ' ').append(piece);
      piece = prefixed;
    }
    words.assign(1, piece);
    apply_splitters(t, t.prefix_after_splitters, t.splitters.size(), words);
    for (std::string_view word : words) encode_word(t, word, ids);
  }
}

// One stretch of the text as given, between added tokens that are matched before normalization:
// normalized, then split at the added tokens matched after it.
void encode_unnormalized_stretch(const BpeTokenizer::Tables& t, std::string_view stretch,
                                 bool at_start, std::vector<int32_t>& ids) {
  if (stretch.empty()) return;
  std::string normalized;
  if (!t.normalizer.empty()) {
    normalized = normalize(t.normalizer, stretch);
    stretch = normalized;
  }
  if (t.normalized_added.empty) {  // the usual case: every added token is matched before
    encode_stretch(t, stretch, at_start, ids);
    return;
  }
  split_at_added_tokens(t.normalized_added, stretch, ids, [&](std::string_view s, bool first) {
    encode_stretch(t, s, at_start && first, ids);
  });
}

// Characters: the text of `ids` through the tokenizer's decoder, special tokens left out unless
// `with_special`.
std::string decode_characters(const BpeTokenizer::Tables& t, std::span<const int32_t> ids,
                              bool with_special) {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= t.text_of.size()) continue;
    if (t.special[id] && !with_special) continue;
    tokens.push_back(t.text_of[id]);
  }
  return decode_tokens(t.decoder, std::move(tokens));
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

const AddedToken* AddedTokenIndex::at(std::string_view text, size_t pos) const {
  for (const AddedToken& token : by_first_byte[static_cast<uint8_t>(text[pos])]) {
    if (token.content.size() <= text.size() - pos &&
        std::memcmp(text.data() + pos, token.content.data(), token.content.size()) == 0) {
      return &token;
    }
  }
  return nullptr;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  const Tables& t = *tables_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  split_at_added_tokens(t.raw_added, text, ids, [&](std::string_view s, bool at_start) {
    encode_unnormalized_stretch(t, s, at_start, ids);
  });
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  const Tables& t = *tables_;
  if (t.characters) return decode_characters(t, ids, false);
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= t.bytes_of.size() || t.special[id]) continue;
    text += t.bytes_of[id];
  }
  return text;
}

std::string BpeTokenizer::decode_with_special_tokens(std::span<const int32_t> ids) const {
  const Tables& t = *tables_;
  if (t.characters) return decode_characters(t, ids, true);
  std::string text;
  for (int32_t id : ids) {
    // An added token's bytes are those its content decodes to (bytes_of), special or not.
    if (id >= 0 && static_cast<size_t>(id) < t.bytes_of.size()) text += t.bytes_of[id];
  }
  return text;
}

bool BpeTokenizer::drops_first_space() const { return tables_->characters; }

int32_t BpeTokenizer::bos() const { return tables_->bos; }
bool BpeTokenizer::adds_bos() const { return tables_->bos >= 0 && tables_->add_bos; }
int32_t BpeTokenizer::eos() const { return tables_->eos; }
uint32_t BpeTokenizer::vocab_size() const { return tables_->vocab_size; }

std::string BpeTokenizer::special_token_text(int32_t id) const {
  const auto it = tables_->added_text.find(id);
  return it == tables_->added_text.end() ? std::string() : it->second;
}

}  // namespace headway::core
