// A request's GuidedOutput (generation_service.h) made into the guide its engine runs.
//
// Threading: pure function, safe from any thread; the guide it returns is one request's.
#pragma once

#include <headway/core/token_guide.h>
#include <headway/serving/generation_service.h>

#include <memory>
#include <string>
#include <vector>

#include "vocabulary_index.h"

namespace headway::serving::guided {

// The field a refusal names for `guided`: its own, or "guided".
std::string field_of(const GuidedOutput& guided);

// Compiles the grammar and returns a guide at the start of the output. Throws ServiceError
// (kInvalidArgument) naming the field, and the part of a schema, at fault.
std::shared_ptr<core::TokenGuide> make_guide(const GuidedOutput& guided,
                                             std::shared_ptr<const VocabularyIndex> vocabulary,
                                             std::vector<int32_t> stop_token_ids);

}  // namespace headway::serving::guided
