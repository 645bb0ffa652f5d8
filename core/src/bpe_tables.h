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

  std::unordered_map<std::string, int32_t> vocab;  // byte-level symbols -> id
  BpeMerges merges;
  bool ignore_merges = false;           // a word that is itself in the vocabulary is one token
  std::array<int32_t, 256> byte_ids{};  // the id of each single byte's symbol

  // By id: the raw bytes a token decodes to, and whether it is special (decodes to nothing).
  std::vector<std::string> bytes_of;
  std::vector<bool> special;

  // Added tokens matched in the text as given, then those matched in each stretch between them
  // once it is normalized (`normalized` ones).
  AddedTokenIndex raw_added;
  AddedTokenIndex normalized_added;
  std::unordered_map<int32_t, std::string> added_text;  // id -> content, as tokenizer.json has it

  bool nfc = false;  // normalizer NFC: each stretch between added tokens is composed first
  std::vector<std::unique_ptr<RegexSplitter>> splitters;  // applied in order
  // ByteLevel's add_prefix_space: a space before each piece that the splitters before ByteLevel's
  // own (the first `prefix_after_splitters`) made and that does not start with one.
  bool add_prefix_space = false;
  size_t prefix_after_splitters = 0;

  int32_t bos = -1;
  int32_t eos = -1;
  uint32_t vocab_size = 0;
};

// Turns checkpoint_dir's tokenizer.json, parsed as `root` (+ tokenizer_config.json / config.json,
// read here), into tables.
std::unique_ptr<const BpeTokenizer::Tables> load_bpe_tables(const std::filesystem::path& dir,
                                                            const nlohmann::json& root);

}  // namespace headway::core
