// A TokenGuide over a Grammar and a vocabulary: the tokens whose bytes may come next.
//
// Which tokens may come depends only on the place in the grammar, and outputs return to the same
// places over and over (inside a string, after a property's ':'). A place's allowed set costs one
// ordered walk of the vocabulary, prefixes shared: cheap where the first bytes decide (a key, a
// number, a literal), dear where most tokens fit (a value of any type, a string with escapes or
// limits). The dear ones are kept (up to kCachedMasks per request, vocab / 8 bytes each), so a
// step at a known place costs a lookup and a pass over the logits.
//
// Ownership: shares the grammar and the vocabulary. Threading: one thread at a time (TokenGuide).
#pragma once

#include <headway/core/token_guide.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar.h"
#include "grammar_matcher.h"
#include "vocabulary_index.h"

namespace headway::serving::guided {

class GrammarGuide final : public core::TokenGuide {
 public:
  static constexpr size_t kCachedMasks = 64;
  // A walk that advanced the matcher fewer times than this is redone rather than kept.
  static constexpr size_t kWorthKeeping = 4096;

  // `stop_token_ids`: the request's, allowed (as the end-of-sequence token is) where the output
  // is complete. `worth_keeping`: kWorthKeeping but in tests (0 keeps every place's set).
  GrammarGuide(std::shared_ptr<const Grammar> grammar,
               std::shared_ptr<const VocabularyIndex> vocabulary,
               std::vector<int32_t> stop_token_ids, size_t worth_keeping = kWorthKeeping);

  void mask(std::span<float> logits) override;
  bool accept(int32_t token) override;
  bool complete() const override;
  bool ended() const override { return ended_; }

  // Whether `token` may come next (what mask() keeps), for tests and callers that check one.
  bool allows(int32_t token);

 private:
  bool is_end_token(int32_t token) const;
  // The allowed set at the current place, one bit per token id.
  const std::vector<uint64_t>& allowed();
  // Returns the walk's cost (walk_tokens).
  size_t compute_allowed(std::vector<uint64_t>& bits);
  // Sets the bits of the tokens of `walk` whose bytes the grammar takes from state_.
  // Returns how many times it advanced the matcher (what the walk cost).
  size_t walk_tokens(const VocabularyIndex::Walk& walk, std::vector<uint64_t>& bits);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabularyIndex> vocabulary_;
  std::vector<int32_t> stop_token_ids_;
  size_t worth_keeping_;
  GrammarMatcher matcher_;
  MatchState state_;
  MatchState scratch_[2];
  std::vector<MatchState> walk_;  // the walk's state after each byte of the current token
  bool ended_ = false;            // an end token was accepted
  std::unordered_map<std::string, uint32_t> cache_;  // place -> masks_ slot
  std::vector<std::vector<uint64_t>> masks_;
  std::vector<uint64_t> unkept_;  // the last cheap place's set
  std::string key_;
};

}  // namespace headway::serving::guided
