// The tokenizer's vocabulary as guided decoding scans it: every token's bytes (the text it adds
// after any other token), and the tokens sorted by those bytes, so that tokens that begin alike
// are checked against the grammar once for what they share (a trie walked in order).
//
// Built once per served model (GrammarGuide's callers share it) and read by every guided request.
// It also keeps the few token lists a reasoning model's guides need (tokens_opening,
// tokens_completing): each is a scan of the whole vocabulary, the same for every request, so it
// is done once here rather than per request (at admission, or on the engine's step thread).
//
// Ownership: owns copies of the bytes; the token lists are shared with the guides that hold them,
// and outlive their place here.
// Threading: immutable after construction but for the kept token lists, which are safe to ask for
// from any thread (admitting and engine threads share one index); the lock covers a look-up among
// at most kTokenListsKept entries, never a scan.
#pragma once

#include <headway/core/tokenizer.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving::guided {

class VocabularyIndex {
 public:
  // Every id of the tokenizer, decoded alone (SentencePiece tokens after a neighbour, so that a
  // leading space is kept). Special tokens decode to nothing and are never allowed, except that
  // the end-of-sequence token ends a complete output.
  explicit VocabularyIndex(const core::Tokenizer& tokenizer);
  // For tests: token i's bytes are token_bytes[i]; `eos` -1 for none.
  VocabularyIndex(const std::vector<std::string>& token_bytes, int32_t eos);

  uint32_t vocab_size() const { return static_cast<uint32_t>(offsets_.size() - 1); }
  int32_t eos() const { return eos_; }
  std::string_view bytes_of(int32_t id) const;

  // Tokens with bytes, sorted by them, as the mask walks them. shared_prefix[i]: how many leading
  // bytes ids[i] shares with ids[i - 1] (0 for the first); first_byte_end[b]: one past the last
  // token that starts with byte b, so that a refused first byte skips all of them at once.
  struct Walk {
    std::vector<int32_t> ids;
    std::vector<uint32_t> shared_prefix;
    std::vector<uint32_t> first_byte_end;  // 256 entries
  };
  // Every token with bytes.
  const Walk& all() const { return all_; }
  // The tokens that are not plain string text (below): inside a JSON string of no length limit
  // only these need a walk.
  const Walk& not_plain_text() const { return not_plain_text_; }
  // One bit per token id: its bytes are whole UTF-8 characters, none a control character, '"'
  // or '\', so that inside a JSON string (not in an escape, no length limit) it always fits and
  // leaves the string open.
  const std::vector<uint64_t>& plain_text() const { return plain_text_; }
  size_t longest_token() const { return longest_; }

  // Token ids in ascending order, shared by every guide that asks for the same list.
  using TokenList = std::shared_ptr<const std::vector<int32_t>>;
  // Lists kept (the most recently used): a served model asks for one or two.
  static constexpr size_t kTokenListsKept = 8;
  // Each list is one scan of the vocabulary the first time (on the caller's thread), then a
  // look-up; an empty text has an empty list.
  // The tokens whose bytes open with `opener` after blanks (opens_after_blanks): those that open
  // a reasoning model's thinking ("<think>"). End tokens included: each request leaves out its own.
  TokenList tokens_opening(std::string_view opener) const;
  // The tokens that can complete `marker` ("</think>") in an output: those that hold it, and those
  // that begin with what is left of it after a part the output may already end with.
  TokenList tokens_completing(std::string_view marker) const;
  // For tests: the lists kept now, and the vocabulary scans made for them so far.
  size_t token_lists_kept() const;
  size_t token_list_scans() const;

 private:
  enum class ListKind { kOpening, kCompleting };
  struct KeptList {
    ListKind kind;
    std::string text;
    TokenList tokens;
  };
  TokenList token_list(ListKind kind, std::string_view text) const;
  TokenList kept_list(ListKind kind, std::string_view text) const;  // lists_mutex_ held; or null

  void index(int32_t eos);
  Walk walk_of(std::vector<int32_t> ids) const;

  std::string bytes_;              // every token's bytes, by id
  std::vector<uint32_t> offsets_;  // token id's bytes are bytes_[offsets_[id], offsets_[id + 1])
  Walk all_;
  Walk not_plain_text_;
  std::vector<uint64_t> plain_text_;
  size_t longest_ = 0;
  int32_t eos_ = -1;

  mutable std::mutex lists_mutex_;
  mutable std::vector<KeptList> lists_;  // least recently used first
  mutable size_t list_scans_ = 0;
};

// Whether `bytes` begin with `text` once leading blanks (space, tab, newline, carriage return) are
// skipped, as the Qwen3 reasoning parser finds its "<think>".
bool opens_after_blanks(std::string_view bytes, std::string_view text);

}  // namespace headway::serving::guided
