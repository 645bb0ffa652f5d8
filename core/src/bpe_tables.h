// What a loaded byte-level BPE tokenizer is made of (private to bpe_tokenizer*.cpp).
#pragma once

#include <headway/core/bpe_tokenizer.h>

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "bpe_merges.h"
#include "regex_splitter.h"

namespace headway::core {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
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

  // Added tokens, longest first, indexed by their first byte for the scan in encode().
  std::array<std::vector<AddedToken>, 256> added_by_first_byte;
  std::unordered_map<int32_t, std::string> added_text;  // id -> content

  bool nfc = false;  // normalizer NFC: each stretch between added tokens is composed first
  std::vector<std::unique_ptr<RegexSplitter>> splitters;  // applied in order
  bool add_prefix_space = false;

  int32_t bos = -1;
  int32_t eos = -1;
  uint32_t vocab_size = 0;
};

// Turns checkpoint_dir's tokenizer.json, parsed as `root` (+ tokenizer_config.json / config.json,
// read here), into tables.
std::unique_ptr<const BpeTokenizer::Tables> load_bpe_tables(const std::filesystem::path& dir,
                                                            const nlohmann::json& root);

}  // namespace headway::core
