// Where a chat prompt's end leaves a reasoning model's thinking (PromptReasoning): read for the
// answer's reasoning parser (GenerateInput::reasoning_end) and for guided output that starts after
// the thinking (GuidedOutput::starts_after).
//
// Only the current turn is read: the text after the last token that starts the assistant's turn
// (TurnMarkers: "<|im_start|>", "<｜Assistant｜>", "<|end_header_id|>") and is not a reasoning tag
// itself, so that a "<think>" in the user's words, or an earlier turn's think block, is not taken
// for the prompt's. The turn is looked for in the last kTurnTokens tokens; a template without
// such tokens (or a continued message longer than that) is read from its last kFallbackTokens
// tokens.
//
// Threading: TurnMarkers is immutable once built; prompt_reasoning only reads.
#pragma once

#include <headway/core/tokenizer.h>
#include <headway/serving/request_stream.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving {

inline constexpr size_t kTurnTokens = 4096;
inline constexpr size_t kFallbackTokens = 32;

// The tokens that may start the assistant's turn: those the answer's text never shows (decode()
// drops them: special tokens, SentencePiece's control tokens, BOS) and the added tokens the chat
// template writes to open the answer (PromptEncoder::generation_prompt()), special or not:
// DeepSeek's "<｜Assistant｜>" is an added token with special false. Other added tokens that are
// not special (Qwen's "<tool_call>", a converted SentencePiece vocabulary's "\n") are text, as are
// added tokens of nothing but blanks. Built once per tokenizer: one pass over the vocabulary.
class TurnMarkers {
 public:
  TurnMarkers(const core::Tokenizer& tokenizer, std::span<const int32_t> generation_prompt);
  // The text of `id` when it is one of them; empty otherwise.
  const std::string& text_of(int32_t id) const;

 private:
  std::vector<std::pair<int32_t, std::string>> markers_;  // by id
  std::string none_;
};

// `marker`: the text that closes the thinking ("</think>"); its opening tag is the same without the
// slash ("<think>"). Closed: the marker after the turn's last opening tag (or with none); open: an
// opening tag after the turn's last marker; otherwise neither.
PromptReasoning prompt_reasoning(const core::Tokenizer& tokenizer, const TurnMarkers& turns,
                                 std::span<const int32_t> prompt, std::string_view marker);

}  // namespace headway::serving
