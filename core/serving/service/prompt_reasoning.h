// Where a chat prompt's end leaves a reasoning model's thinking (PromptReasoning): read for the
// answer's reasoning parser (GenerateInput::reasoning_end) and for guided output that starts after
// the thinking (GuidedOutput::starts_after).
//
// Only the current turn is read: the text after the last special token that is not itself a
// reasoning tag (the template's role markers: "<|im_start|>", "<｜Assistant｜>",
// "<|end_header_id|>"), so that a "<think>" the user wrote, or an earlier turn's think block, is
// not taken for the prompt's. The turn is looked for in the last kTurnTokens tokens; a template
// without special tokens (or a continued message longer than that) is read from its last
// kFallbackTokens tokens.
//
// Threading: a free function; the tokenizer is only read.
#pragma once

#include <headway/core/tokenizer.h>
#include <headway/serving/request_stream.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace headway::serving {

inline constexpr size_t kTurnTokens = 4096;
inline constexpr size_t kFallbackTokens = 32;

// `marker`: the text that closes the thinking ("</think>"); its opening tag is the same without the
// slash ("<think>"). Closed: the marker after the turn's last opening tag (or with none); open: an
// opening tag after the turn's last marker; otherwise neither.
PromptReasoning prompt_reasoning(const core::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                 std::string_view marker);

}  // namespace headway::serving
