#include "guided_output.h"

#include <headway/serving/service_error.h>

#include "grammar_guide.h"
#include "json_schema.h"

namespace headway::serving::guided {

namespace {

// What makes two requests' grammars the same: the kind and its text, length-prefixed so that no
// two different outputs give one key.
std::string key_of(const GuidedOutput& guided) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(guided.kind)));
  const auto add = [&](const std::string& text) {
    key += std::to_string(text.size());
    key += ':';
    key += text;
  };
  add(guided.schema_json);
  add(guided.regex);
  add(guided.grammar);
  for (const std::string& choice : guided.choices) add(choice);
  return key;
}

Grammar compile(const GuidedOutput& guided, const std::string& field) {
  switch (guided.kind) {
    case GuidedOutput::Kind::kJsonSchema:
      return compile_json_schema(guided.schema_json, field);
    case GuidedOutput::Kind::kJsonObject:
      return any_json_object_grammar();
    case GuidedOutput::Kind::kChoice:
      return choice_grammar(guided.choices, field);
    case GuidedOutput::Kind::kRegex:
      return regex_grammar(guided.regex, field);
    case GuidedOutput::Kind::kGrammar:
      return ebnf_grammar(guided.grammar, field);
    case GuidedOutput::Kind::kNone:
      break;
  }
  return {};
}

}  // namespace

std::string field_of(const GuidedOutput& guided) {
  return guided.field.empty() ? std::string("guided") : guided.field;
}

GuideFactory::Compiled GuideFactory::compiled(const GuidedOutput& guided) {
  const std::string key = key_of(guided);
  {
    std::lock_guard lock(mutex_);
    if (const auto found = index_.find(key); found != index_.end()) {
      recent_.splice(recent_.begin(), recent_, found->second);
      return found->second->second;
    }
  }
  // Compiled outside the lock: a large schema does not hold up requests for others. Two requests
  // that race on a new grammar compile it twice, and the first one in is kept.
  Compiled made{std::make_shared<const Grammar>(compile(guided, field_of(guided))),
                std::make_shared<MaskStore>(kMasksPerGrammar)};
  std::lock_guard lock(mutex_);
  if (const auto found = index_.find(key); found != index_.end()) return found->second->second;
  recent_.emplace_front(key, made);
  index_.emplace(key, recent_.begin());
  if (recent_.size() > kGrammars) {
    index_.erase(recent_.back().first);
    recent_.pop_back();
  }
  return made;
}

std::shared_ptr<core::TokenGuide> GuideFactory::make(const GuidedOutput& guided,
                                                     const std::vector<int32_t>& stop_token_ids) {
  if (guided.kind == GuidedOutput::Kind::kNone) return nullptr;
  Compiled shared = compiled(guided);
  return std::make_shared<GrammarGuide>(std::move(shared.grammar), vocabulary_, stop_token_ids,
                                        std::move(shared.store), GrammarGuide::kWorthKeeping,
                                        guided.starts_after, guided.reasoning_opener);
}

size_t GuideFactory::grammars() const {
  std::lock_guard lock(mutex_);
  return recent_.size();
}

}  // namespace headway::serving::guided
