// A TokenGuide over a Grammar and a vocabulary: the tokens whose bytes may come next.
//
// Which tokens may come depends only on the place in the grammar, and outputs return to the same
// places over and over (inside a string, after a property's ':'), in this request and in every
// other that uses the same grammar. A place's allowed set costs one ordered walk of the
// vocabulary, prefixes shared: cheap where the first bytes decide (a key, a number, a literal),
// dear where most tokens fit (a value of any type, a string with escapes or limits). The dear
// ones are kept in the grammar's MaskStore, shared by its requests, so a step at a known place
// costs a lookup and a pass over the logits.
//
// A reasoning model's guide also needs the tokens that could close the thinking and, under
// reasoning_opener, those that open it: the vocabulary keeps those lists for every guide
// (VocabularyIndex::tokens_completing, tokens_opening), asked for once, by the constructor.
//
// Ownership: shares the grammar, the vocabulary, the store and the vocabulary's token lists.
// Threading: one thread at a time (TokenGuide); the store and the token lists are shared safely.
#pragma once

#include <headway/core/token_guide.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar.h"
#include "grammar_matcher.h"
#include "mask_store.h"
#include "vocabulary_index.h"

namespace headway::serving::guided {

class GrammarGuide final : public core::TokenGuide {
 public:
  // A walk that advanced the matcher fewer times than this is redone rather than kept.
  static constexpr size_t kWorthKeeping = 4096;

  // Whitespace that may come between `starts_after` and the value (a blank line).
  static constexpr uint32_t kLeadingWhitespace = 4;

  // `stop_token_ids`: the request's, allowed (as the end-of-sequence token is) only where the
  // output is complete. `store`: the grammar's (null: a store of this guide's own).
  // `worth_keeping`: kWorthKeeping but in tests (0 keeps every place's set). `starts_after`: the
  // grammar applies only after this text (a reasoning model's "</think>"); before it anything
  // but an end token may come. Empty: from the first byte. `reasoning_opener` (with
  // starts_after): the reasoning is there only when the first token opens with this text, blanks
  // before it allowed (Qwen3's "<think>", one token in its vocabulary); the first token is either
  // such a token or one the grammar takes from its start, and in the second case the grammar
  // applies from the first byte, as the Qwen3 reasoning parser takes an output that does not open
  // with the tag for all answer.
  GrammarGuide(std::shared_ptr<const Grammar> grammar,
               std::shared_ptr<const VocabularyIndex> vocabulary,
               const std::vector<int32_t>& stop_token_ids,
               std::shared_ptr<MaskStore> store = nullptr, size_t worth_keeping = kWorthKeeping,
               std::string starts_after = {}, std::string reasoning_opener = {});

  void mask(std::span<float> logits) override;
  bool accept(int32_t token) override;
  bool complete() const override;
  bool ended() const override { return ended_; }

  // Whether `token` may come next (what mask() keeps), for tests and callers that check one.
  bool allows(int32_t token);

 private:
  bool is_end_token(int32_t token) const;
  // Before starts_after: nullopt when `bytes` do not complete it; else whether the grammar takes
  // what follows it in them (from its start, leading whitespace allowed), the state after that
  // left in marker_state_[0].
  std::optional<bool> completes_marker(std::string_view bytes);
  // Before starts_after: every token but the end tokens and those that complete it with bytes the
  // grammar refuses.
  void mask_free(std::span<float> logits);
  // The grammar's set at the current place, end tokens where the output may end; where no token
  // fits, the end-of-sequence token, unless `others_may_come` (tokens the caller allows besides).
  void mask_grammar(std::span<float> logits, bool others_may_come = false);
  // accept() while thinking (before starts_after) and in the shape; each changes nothing when it
  // refuses the token.
  bool accept_thinking(int32_t token);
  bool accept_shaped(int32_t token);
  // First token with reasoning_opener: the grammar's set, and the tokens that open the reasoning.
  void mask_opening(std::span<float> logits);
  // Whether `token` opens the reasoning (reasoning_opener after blanks).
  bool opens_reasoning(int32_t token) const;
  // The tokens other than end tokens whose bytes fit at the current place, one bit per id.
  const std::vector<uint64_t>& fitting();
  // Sets the bits of the tokens of `walk` whose bytes the grammar takes from `from`.
  // Returns how many times it advanced the matcher (what the walk cost).
  size_t walk_tokens(const MatchState& from, const VocabularyIndex::Walk& walk,
                     std::vector<uint64_t>& bits);
  // The same where state_ reads a pattern (matcher_.automaton_at): the automaton alone steps the
  // bytes, a table lookup each; the matcher is asked only where the pattern may end inside the
  // token: where the automaton refuses a byte that may close it after a match (`closing`: a
  // string's quote and what follows it in the token), or, for raw text inside a grammar
  // (kParentReads), at every match the token passes, parent_ reading the rest.
  size_t walk_automaton(const ByteDfa& dfa, uint32_t start, int closing,
                        const VocabularyIndex::Walk& walk, std::vector<uint64_t>& bits);
  // Whether `rest` fits after the pattern has reached `automaton_state` (a match), per the
  // matcher (its advances added to `steps`); or, `from_parent`, after the text has ended there.
  // Remembered for the walk, since few different rests ('"', "\",", ...) come.
  bool rest_fits_after(uint32_t automaton_state, std::string_view rest, size_t& steps,
                       bool from_parent);
  // ORs into `bits` the set of `place` (raw text's parent place: tokens read after the text ends
  // before them), from the store or walked and kept there; returns what a walk cost.
  size_t add_place_set(const MatchState& place, std::vector<uint64_t>& bits);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabularyIndex> vocabulary_;
  std::vector<int32_t> end_tokens_;  // end-of-sequence (when there is one), then the stop ids
  std::shared_ptr<MaskStore> store_;
  size_t worth_keeping_;
  GrammarMatcher matcher_;
  MatchState state_;
  MatchState scratch_[2];
  MatchState parent_;                  // state_ once its raw text has ended (kParentReads)
  std::vector<uint64_t> parent_bits_;  // parent_'s set, walked
  std::string place_key_;              // parent_'s key in the store
  static constexpr int8_t kUnknown = -1;
  std::array<int8_t, 256> parent_takes_{};  // per first byte: whether parent_ takes it, this walk
  std::vector<MatchState> walk_;            // the walk's state after each byte of the current token
  std::vector<uint32_t> automaton_walk_;    // the same, for walk_automaton
  std::unordered_map<std::string, bool> rests_;  // rest_fits_after's answers in this walk
  std::string rest_key_;
  bool ended_ = false;  // an end token was accepted
  std::string key_;
  MaskStore::Mask held_;                // the kept set in use (shared with the store)
  std::vector<uint64_t> walked_;        // a set just walked
  std::vector<float> end_logits_;       // the end tokens' logits, while mask() writes the set
  std::string marker_;                  // starts_after, while it has not come yet
  std::string opener_;                  // reasoning_opener, until the first token is taken
  std::vector<int32_t> opener_tokens_;  // the tokens that open the reasoning (opens_reasoning)
  std::vector<float> opener_logits_;    // scratch: their logits, while the grammar's mask is set
  std::string marker_tail_;             // the output's last bytes that may begin it
  // The tokens that can complete marker_: the vocabulary's list, shared (null without a marker).
  VocabularyIndex::TokenList marker_ends_;
  std::string marker_text_;     // scratch: the tail and a token's bytes
  MatchState marker_state_[2];  // scratch: the grammar after the marker
};

}  // namespace headway::serving::guided
