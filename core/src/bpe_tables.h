// What a loaded byte-level BPE tokenizer is made of (private to bpe_tokenizer*.cpp).
#pragma once

#include <headway/core/bpe_tokenizer.h>

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bpe_merges.h"
#include "regex_splitter.h"
#include "text_steps.h"

namespace headway::core {

struct AddedToken {
  std::string content;  // as matched: composed (NFC) when `normalized` and the normalizer is NFC
  int32_t id = -1;
  bool special = false;
  // Matched in the normalized text, after the tokens that are not (Hugging Face's two passes);
  // tokenizer.json's `normalized`, by default not `special`.
  bool normalized = false;
};

// Added tokens, longest first, indexed by their first byte for the scan in encode().
struct AddedTokenIndex {
  std::array<std::vector<AddedToken>, 256> by_first_byte;
  bool empty = true;
  // The added token that starts at text[pos], the longest when several do; nullptr when none.
  const AddedToken* at(std::string_view text, size_t pos) const;
};

struct BpeTokenizer::Tables {
  std::string where;  // tokenizer.json's path, for errors at encode time

  // SentencePiece-style BPE (Llama 2, Mistral: no ByteLevel step): the symbols a word starts as
  // are its characters, not its bytes, and decoding runs `decoder`.
  bool characters = false;

  std::unordered_map<std::string, int32_t> vocab;  // token -> id
  BpeMerges merges;
  bool ignore_merges = false;           // a word that is itself in the vocabulary is one token
  std::array<int32_t, 256> byte_ids{};  // byte-level: the id of each single byte's symbol

  // Characters: the id of each one-character token, and what a character without one becomes:
  // its bytes' <0xXX> tokens (byte_fallback), else `unk` (one for a run of them with fuse_unk).
  std::unordered_map<char32_t, int32_t> character_ids;
  bool byte_fallback = false;
  std::array<int32_t, 256> fallback_ids{};
  int32_t unk = -1;
  bool fuse_unk = false;

  // By id: whether a token is special (decodes to nothing), and what it decodes from: byte-level,
  // the raw bytes; characters, its vocabulary string (or added token's content) for `decoder`.
  std::vector<bool> special;
  std::vector<std::string> bytes_of;
  std::vector<std::string> text_of;
  std::vector<DecoderStep> decoder;

  // Added tokens matched in the text as given, then those matched in each stretch between them
  // once it is normalized (`normalized` ones).
  AddedTokenIndex raw_added;
  AddedTokenIndex normalized_added;
  std::unordered_map<int32_t, std::string> added_text;  // id -> content, as tokenizer.json has it

  // Applied to each stretch between the added tokens matched before normalization.
  std::vector<NormalizerStep> normalizer;
  std::vector<std::unique_ptr<RegexSplitter>> splitters;  // applied in order
  // ByteLevel's add_prefix_space: a space before each piece that the splitters before ByteLevel's
  // own (the first `prefix_after_splitters`) made and that does not start with one.
  bool add_prefix_space = false;
  size_t prefix_after_splitters = 0;
  // Characters: the Metaspace pre-tokenizer, when there is one (else a stretch is one word).
  bool metaspace_words = false;
  Metaspace metaspace;

  int32_t bos = -1;
  int32_t eos = -1;
  // tokenizer_config.json's add_bos_token (true where absent): whether a text prompt starts
  // with bos.
  bool add_bos = true;
  uint32_t vocab_size = 0;
};

// Turns checkpoint_dir's tokenizer.json, parsed as `root` (+ tokenizer_config.json / config.json,
// read here), into tables.
std::unique_ptr<const BpeTokenizer::Tables> load_bpe_tables(const std::filesystem::path& dir,
                                                            const nlohmann::json& root);

}  // namespace headway::core
