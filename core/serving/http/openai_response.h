// The JSON bodies Headway answers with: a whole completion (object "text_completion" or
// "chat.completion"), the chunks of a stream ("text_completion" or "chat.completion.chunk") and
// their SSE framing. Shapes follow the OpenAI API as vLLM serves it. Bodies are
// nlohmann::ordered_json, so that keys go out in the order written (OpenAI's: id, object, created,
// model, choices, usage) and a completions top_logprobs object lists the most likely token first.
//
// Threading: plain values and pure functions.
#pragma once

#include <headway/serving/request_stream.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "answer_parser.h"

namespace headway::serving::http {

// kResponses: OpenAI's Responses API, which runs a chat request and answers in its own shapes
// (responses_json.h).
enum class Endpoint { kCompletions, kChatCompletions, kResponses };

// What every body of one response repeats.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;              // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;         // Unix seconds
  std::string model;           // the served model's name
  bool include_usage = false;  // streams: "usage": null on each chunk, then a usage chunk
  // With include_usage (vLLM's continuous_usage_stats): each chunk's "usage" is the usage so far.
  bool continuous_usage = false;
  // Each choice also carries "token_ids": the tokens generated (whole answer) or since the
  // previous chunk (streams). A stream then sends a chunk for tokens that have no text yet.
  bool return_token_ids = false;
  // The client asked for logprobs (SamplingParams::logprobs >= 0): a stream then sends a chunk
  // for tokens that have no text yet, so that every token's logprobs go out.
  bool logprobs = false;
  // vLLM's prompt_logprobs were asked for: each completions choice carries "prompt_logprobs", a
  // chat answer carries its first choice's.
  bool prompt_logprobs = false;
  // OpenAI's n: choice i answers prompt i / n of a completions batch (usage counts each prompt
  // once).
  uint32_t choices_per_prompt = 1;
};

// "length" or "stop" ("tool_calls" when the answer called tools); null while running.
// kAbort/kError never reach a finish_reason: they become errors.
nlohmann::ordered_json finish_reason_json(Finish finish, bool called_tools = false);
// vLLM's stop_reason: the stop string or stop token id that ended the request; null otherwise
// (EOS, max_tokens, still running).
nlohmann::ordered_json stop_reason_json(const StopReason& reason);

nlohmann::ordered_json usage_json(const Usage& usage);

// One choice of a non-streamed answer.
struct ChoiceOutput {
  std::string text;
  std::vector<int32_t> token_ids;
  Finish finish = Finish::kNone;
  StopReason stop_reason;
  nlohmann::ordered_json logprobs;         // LogprobsJson's value: null when not asked for
  nlohmann::ordered_json prompt_logprobs;  // prompt_logprobs_json(), with header.prompt_logprobs
  // Chat with tool calls parsed: `text` is the content outside the calls (null in the message
  // when empty), and the finish_reason is "tool_calls".
  std::vector<ToolCall> tool_calls;
  // Chat with reasoning parsed: the thinking ("reasoning" and "reasoning_content", null when
  // empty); `text` is the rest (null when empty). nullopt: not parsed, no such field.
  std::optional<std::string> reasoning;
  // Chat's echo was asked: the content is a string even when empty, as vLLM writes it then.
  bool echoed = false;
  // With header.return_token_ids: the prompt's ids as run (a completions choice carries its
  // prompt's, a chat answer its first choice's, beside the choices, as vLLM writes them),
  // borrowed from the choice's stream until the answer is written.
  std::span<const int32_t> prompt_token_ids;
};

// The non-streamed answer: choices indexed in order (OpenAI's n), `usage` over all of them.
nlohmann::ordered_json completion_json(const ResponseHeader& header,
                                       std::span<const ChoiceOutput> choices, const Usage& usage);

// Streams. A chat stream opens with role_chunk_json (one per choice); every stream then carries
// text deltas of its choices (each choice's last one with its finish), then with include_usage a
// usage chunk, then the [DONE] event. `index`: the choice's. `usage`: the usage so far, which a
// chunk carries under header.continuous_usage.
// With header.return_token_ids, the chunk carries `prompt_token_ids` beside its choice (vLLM's):
// role_chunk_json always, delta_chunk_json when they are not empty (a completions choice's first).
nlohmann::ordered_json role_chunk_json(const ResponseHeader& header, uint32_t index,
                                       const Usage& usage,
                                       std::span<const int32_t> prompt_token_ids = {});
// What a chat stream's chunk carries besides its content when the answer is parsed: reasoning
// text, the tool calls this chunk completes (numbered from first_call_index within the choice),
// and whether the choice called any (its finish_reason is then "tool_calls").
struct ParsedDelta {
  std::string_view reasoning;
  std::span<const ToolCall> calls;
  uint32_t first_call_index = 0;
  bool called_tools = false;
};
nlohmann::ordered_json delta_chunk_json(const ResponseHeader& header, uint32_t index,
                                        std::string_view text, std::span<const int32_t> token_ids,
                                        Finish finish, const StopReason& stop_reason,
                                        const Usage& usage,
                                        nlohmann::ordered_json logprobs = nullptr,
                                        const ParsedDelta& parsed = {},
                                        std::span<const int32_t> prompt_token_ids = {});
nlohmann::ordered_json usage_chunk_json(const ResponseHeader& header, const Usage& usage);

// "data: <json>\n\n". Invalid UTF-8 in generated text is replaced (U+FFFD), never thrown.
std::string sse_event(const nlohmann::ordered_json& body);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// An SSE comment: ignored by clients, but a write that tells whether the client is still there.
inline constexpr const char* kSseKeepAlive = ": keep-alive\n\n";

// The body as sent: invalid UTF-8 replaced rather than thrown.
std::string dump_json(const nlohmann::ordered_json& body);

}  // namespace headway::serving::http
