#include "prompt_reasoning.h"

#include <algorithm>
#include <string>

namespace headway::serving {
namespace {

// A token the answer's text never shows (decode() skips it) but the template writes: a role or
// turn marker, or BOS. One whose text holds a reasoning tag is part of the turn (a tokenizer that
// marks "<think>" special).
bool starts_turn(const core::Tokenizer& tokenizer, int32_t id, std::string_view opening,
                 std::string_view marker) {
  const std::span<const int32_t> one(&id, 1);
  if (!tokenizer.decode(one).empty()) return false;
  const std::string text = tokenizer.decode_with_special_tokens(one);
  return !text.empty() && text.find(marker) == std::string::npos &&
         (opening.empty() || text.find(opening) == std::string::npos);
}

}  // namespace

PromptReasoning prompt_reasoning(const core::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                 std::string_view marker) {
  // "</think>" opens with "<think>". (Built by appending: GCC 12 at -O3 warns, falsely, that
  // `"<" + marker.substr(2)` may copy overlapping memory, its bug 105329.)
  std::string opening;
  if (marker.starts_with("</")) opening.append("<").append(marker.substr(2));
  size_t turn = prompt.size() - std::min(prompt.size(), kFallbackTokens);
  const size_t looked_at = std::min(prompt.size(), kTurnTokens);
  for (size_t back = 1; back <= looked_at; ++back) {
    const size_t at = prompt.size() - back;
    if (starts_turn(tokenizer, prompt[at], opening, marker)) {
      turn = at + 1;
      break;
    }
  }
  const std::string tail = tokenizer.decode_with_special_tokens(prompt.subspan(turn));
  const size_t closed = tail.rfind(marker);
  const size_t opened = opening.empty() ? std::string::npos : tail.rfind(opening);
  if (opened != std::string::npos && (closed == std::string::npos || opened > closed)) {
    return PromptReasoning::kOpen;
  }
  return closed == std::string::npos ? PromptReasoning::kNone : PromptReasoning::kEnded;
}

}  // namespace headway::serving
