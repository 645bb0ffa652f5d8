#include "prompt_reasoning.h"

#include <algorithm>

namespace headway::serving {

TurnMarkers::TurnMarkers(const core::Tokenizer& tokenizer,
                         std::span<const int32_t> generation_prompt) {
  const uint32_t vocab = tokenizer.vocab_size();
  for (uint32_t i = 0; i < vocab; ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::span<const int32_t> one(&id, 1);
    if (!tokenizer.decode(one).empty()) continue;
    std::string text = tokenizer.decode_with_special_tokens(one);
    if (!text.empty()) markers_.emplace_back(id, std::move(text));
  }
  for (const int32_t id : generation_prompt) {
    std::string text = tokenizer.special_token_text(id);
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;  // none, or blanks
    const auto at =
        std::lower_bound(markers_.begin(), markers_.end(), id,
                         [](const auto& marker, int32_t key) { return marker.first < key; });
    if (at == markers_.end() || at->first != id) markers_.emplace(at, id, std::move(text));
  }
}

const std::string& TurnMarkers::text_of(int32_t id) const {
  const auto it =
      std::lower_bound(markers_.begin(), markers_.end(), id,
                       [](const auto& marker, int32_t key) { return marker.first < key; });
  return it != markers_.end() && it->first == id ? it->second : none_;
}

PromptReasoning prompt_reasoning(const core::Tokenizer& tokenizer, const TurnMarkers& turns,
                                 std::span<const int32_t> prompt, std::string_view marker) {
  // "</think>" opens with "<think>". (Built by appending: GCC 12 at -O3 warns, falsely, that
  // `"<" + marker.substr(2)` may copy overlapping memory, its bug 105329.)
  std::string opening;
  if (marker.starts_with("</")) opening.append("<").append(marker.substr(2));
  // A tag, or part of one either way: the token "<think>" against a marker "</think>\n\n" from
  // gRPC, whose opening "<think>\n\n" the token does not hold.
  const auto holds_tag = [&](const std::string& text) {
    const auto overlaps = [&](std::string_view tag) {
      return !tag.empty() &&
             (text.find(tag) != std::string::npos || tag.find(text) != std::string_view::npos);
    };
    return overlaps(marker) || overlaps(opening);
  };
  size_t turn = prompt.size() - std::min(prompt.size(), kFallbackTokens);
  const size_t looked_at = std::min(prompt.size(), kTurnTokens);
  for (size_t back = 1; back <= looked_at; ++back) {
    const std::string& text = turns.text_of(prompt[prompt.size() - back]);
    // A reasoning tag that is an added token ("<think>" in Qwen's vocabulary) is in the turn.
    if (!text.empty() && !holds_tag(text)) {
      turn = prompt.size() - back + 1;
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
