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
// Ownership: shares the grammar, the vocabulary and the store. Threading: one thread at a time
// (TokenGuide); the store is shared safely.
#pragma once

#include <headway/core/token_guide.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
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

  // `stop_token_ids`: the request's, allowed (as the end-of-sequence token is) only where the
  // output is complete. `store`: the grammar's (null: a store of this guide's own).
  // `worth_keeping`: kWorthKeeping but in tests (0 keeps every place's set).
  GrammarGuide(std::shared_ptr<const Grammar> grammar,
               std::shared_ptr<const VocabularyIndex> vocabulary,
               const std::vector<int32_t>& stop_token_ids,
               std::shared_ptr<MaskStore> store = nullptr, size_t worth_keeping = kWorthKeeping);

  void mask(std::span<float> logits) override;
  bool accept(int32_t token) override;
  bool complete() const override;
  bool ended() const override { return ended_; }

  // Whether `token` may come next (what mask() keeps), for tests and callers that check one.
  bool allows(int32_t token);

 private:
  bool is_end_token(int32_t token) const;
  // The tokens other than end tokens whose bytes fit at the current place, one bit per id.
  const std::vector<uint64_t>& fitting();
  // Sets the bits of the tokens of `walk` whose bytes the grammar takes from state_.
  // Returns how many times it advanced the matcher (what the walk cost).
  size_t walk_tokens(const VocabularyIndex::Walk& walk, std::vector<uint64_t>& bits);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabularyIndex> vocabulary_;
  std::vector<int32_t> end_tokens_;  // end-of-sequence (when there is one), then the stop ids
  std::shared_ptr<MaskStore> store_;
  size_t worth_keeping_;
  GrammarMatcher matcher_;
  MatchState state_;
  MatchState scratch_[2];
  std::vector<MatchState> walk_;  // the walk's state after each byte of the current token
  bool ended_ = false;            // an end token was accepted
  std::string key_;
  MaskStore::Mask held_;           // the kept set in use (shared with the store)
  std::vector<uint64_t> walked_;   // a set just walked
  std::vector<float> end_logits_;  // the end tokens' logits, while mask() writes the set
};

}  // namespace headway::serving::guided
