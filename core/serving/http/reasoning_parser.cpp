#include "reasoning_parser.h"

#include "partial_tag.h"

namespace headway::serving::http {
namespace {

constexpr std::string_view kThinkOpen = kReasoningStart;
constexpr std::string_view kThinkClose = kReasoningEnd;
constexpr std::string_view kWhitespace = " \t\r\n";

}  // namespace

std::optional<ReasoningFormat> reasoning_format_named(std::string_view name) {
  if (name == "deepseek_r1") return ReasoningFormat::kDeepSeekR1;
  if (name == "qwen3") return ReasoningFormat::kQwen3;
  return std::nullopt;
}

void ReasoningParser::follow_prompt(PromptReasoning where) {
  tagless_reasoning_ = where == PromptReasoning::kOpen ||
                       (where == PromptReasoning::kNone && format_ == ReasoningFormat::kDeepSeekR1);
}

void ReasoningParser::feed(std::string_view text, std::string& reasoning, std::string& content) {
  pending_ += text;
  if (state_ == State::kStart) {
    const size_t start = std::min(pending_.find_first_not_of(kWhitespace), pending_.size());
    const std::string_view rest = std::string_view(pending_).substr(start);
    if (rest.starts_with(kThinkOpen)) {
      pending_.erase(0, start + kThinkOpen.size());
      state_ = State::kReasoning;
    } else if (kThinkOpen.starts_with(rest)) {
      return;  // whitespace, or the tag cut short
    } else {
      // No opening tag: the prompt opened the thinking (R1's template, Qwen3-Thinking-2507's), or
      // the model is not thinking (Qwen3's by default, any whose prompt closed it).
      state_ = tagless_reasoning_ ? State::kReasoning : State::kContent;
    }
  }
  if (state_ == State::kReasoning) {
    const size_t close = pending_.find(kThinkClose);
    if (close == std::string::npos) {
      const size_t ready = pending_.size() - partial_tag_at_end(pending_, kThinkClose);
      reasoning.append(pending_, 0, ready);
      pending_.erase(0, ready);
      return;
    }
    reasoning.append(pending_, 0, close);
    pending_.erase(0, close + kThinkClose.size());
    state_ = State::kContent;
  }
  content += pending_;
  pending_.clear();
}

void ReasoningParser::finish(std::string& reasoning, std::string& content) {
  const bool reasoning_left =
      state_ == State::kReasoning || (state_ == State::kStart && tagless_reasoning_);
  (reasoning_left ? reasoning : content) += pending_;
  pending_.clear();
  state_ = State::kStart;
}

}  // namespace headway::serving::http
