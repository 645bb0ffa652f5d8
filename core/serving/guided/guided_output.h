// A request's GuidedOutput (generation_service.h) made into the guide its engine runs.
//
// Requests that ask for the same output (the same schema text, the same choices) share one
// compiled grammar and its MaskStore: a place one of them walked is a lookup for the others. The
// factory keeps the last kGrammars of them.
//
// Ownership: the factory shares the vocabulary and the grammars with the guides it makes.
// Threading: make() is safe to call from any thread, concurrently (compiles run outside the
// lock); each guide it returns is one request's.
#pragma once

#include <headway/core/token_guide.h>
#include <headway/serving/generation_service.h>

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar.h"
#include "mask_store.h"
#include "vocabulary_index.h"

namespace headway::serving::guided {

// The field a refusal names for `guided`: its own, or "guided".
std::string field_of(const GuidedOutput& guided);

class GuideFactory {
 public:
  static constexpr size_t kGrammars = 16;          // grammars kept, the most recently used
  static constexpr size_t kMasksPerGrammar = 128;  // vocab / 8 bytes each

  explicit GuideFactory(std::shared_ptr<const VocabularyIndex> vocabulary)
      : vocabulary_(std::move(vocabulary)) {}

  // A guide at the start of the output. Throws ServiceError (kInvalidArgument) naming the field,
  // and the part of a schema, at fault.
  std::shared_ptr<core::TokenGuide> make(const GuidedOutput& guided,
                                         const std::vector<int32_t>& stop_token_ids);

  // Grammars kept now (tests).
  size_t grammars() const;

 private:
  struct Compiled {
    std::shared_ptr<const Grammar> grammar;
    std::shared_ptr<MaskStore> store;
  };
  Compiled compiled(const GuidedOutput& guided);

  std::shared_ptr<const VocabularyIndex> vocabulary_;
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, Compiled>> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<std::pair<std::string, Compiled>>::iterator> index_;
};

}  // namespace headway::serving::guided
