// A reasoning model's thinking, split from its answer as vLLM's reasoning parsers do
// (`--reasoning-parser`): the operator names the format ([server] reasoning_parser) and each chat
// answer's text is cut into the reasoning (returned as the message's "reasoning") and the content.
//
// Formats:
// - deepseek_r1 (DeepSeek-R1 and its distills, and models whose template opens "<think>" in the
//   prompt): everything before "</think>" is reasoning, a leading "<think>" dropped; an answer
//   that never closes it is all reasoning.
// - qwen3 (Qwen3, QwQ): an answer that opens with "<think>" reasons up to "</think>"; one that does
//   not (thinking turned off) is all content.
// Where the prompt already opened the thinking (Qwen3-Thinking-2507's template ends it with
// "<think>\n"), an answer without the opening tag reasons up to "</think>" in both formats; where
// the prompt closed it (Qwen3's enable_thinking off), such an answer is all content in both
// (follow_prompt()).
// Whitespace before the opening tag is dropped; the tags never reach the client.
//
// Streams: feed() gives back the reasoning and content that can go out now, holding back only what
// may still be a tag ("<thi", "</th"). The same text gives the same reasoning and content however
// it is cut into pieces.
//
// Threading: one thread at a time (one parser per choice).
#pragma once

#include <headway/serving/request_stream.h>

#include <optional>
#include <string>
#include <string_view>

namespace headway::serving::http {

enum class ReasoningFormat { kDeepSeekR1, kQwen3 };

// What opens the thinking in both formats, and what ends it (guided output starts after it).
inline constexpr std::string_view kReasoningStart = "<think>";
inline constexpr std::string_view kReasoningEnd = "</think>";

// "deepseek_r1" or "qwen3"; nullopt for any other name.
std::optional<ReasoningFormat> reasoning_format_named(std::string_view name);

class ReasoningParser {
 public:
  explicit ReasoningParser(ReasoningFormat format)
      : format_(format), tagless_reasoning_(format == ReasoningFormat::kDeepSeekR1) {}

  // Where the request's prompt left the thinking (RequestStream::prompt_reasoning()): decides
  // what an answer that does not open with "<think>" is. Call before the first feed().
  void follow_prompt(PromptReasoning where);

  // More generated text: what is now known to be reasoning or content is appended to them.
  void feed(std::string_view text, std::string& reasoning, std::string& content);
  // The answer ended: whatever was held back.
  void finish(std::string& reasoning, std::string& content);

 private:
  enum class State {
    kStart,      // only whitespace, or a part of "<think>", so far
    kReasoning,  // inside the thinking, waiting for "</think>"
    kContent,    // after it (or an answer without thinking)
  };
  ReasoningFormat format_;
  // An answer that does not open with "<think>" is reasoning (up to "</think>"), not content.
  bool tagless_reasoning_;
  State state_ = State::kStart;
  std::string pending_;  // text not yet given out
};

}  // namespace headway::serving::http
