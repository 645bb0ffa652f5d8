#include "guided_output.h"

#include <headway/serving/service_error.h>

#include "grammar_guide.h"
#include "json_schema.h"

namespace headway::serving::guided {

std::string field_of(const GuidedOutput& guided) {
  return guided.field.empty() ? std::string("guided") : guided.field;
}

std::shared_ptr<core::TokenGuide> make_guide(const GuidedOutput& guided,
                                             std::shared_ptr<const VocabularyIndex> vocabulary,
                                             std::vector<int32_t> stop_token_ids) {
  const std::string field = field_of(guided);
  auto grammar = std::make_shared<Grammar>();
  switch (guided.kind) {
    case GuidedOutput::Kind::kJsonSchema:
      *grammar = compile_json_schema(guided.schema_json, field);
      break;
    case GuidedOutput::Kind::kJsonObject:
      *grammar = any_json_object_grammar();
      break;
    case GuidedOutput::Kind::kChoice:
      *grammar = choice_grammar(guided.choices, field);
      break;
    case GuidedOutput::Kind::kNone:
      return nullptr;
  }
  return std::make_shared<GrammarGuide>(std::move(grammar), std::move(vocabulary),
                                        std::move(stop_token_ids));
}

}  // namespace headway::serving::guided
