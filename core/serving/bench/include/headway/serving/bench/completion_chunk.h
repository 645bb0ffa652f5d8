// One "data:" payload of an OpenAI-compatible streamed completion, reduced to what a benchmark
// client measures. Reads the /v1/completions shape (choices[0].text) and, so that a chat stream can
// be measured too, the /v1/chat/completions one (choices[0].delta.content).
//
// A chunk may carry several tokens. The OpenAI format has no per-chunk token count, but servers add
// one in three ways, read here in this order of preference: the chunk's own usage with a running
// completion_tokens (vLLM's stream_options.continuous_usage_stats), choices[0].token_ids (vLLM's
// return_token_ids), choices[0].logprobs.tokens (when logprobs were asked for). How the counts turn
// into token times is stream_measurement.h's business.
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving::bench {

struct CompletionChunk {
  bool has_choice = false;  // false for the final usage-only chunk of stream_options.include_usage
  std::string text;         // choices[0].text, or choices[0].delta.content
  std::optional<uint32_t> tokens;  // token_ids or logprobs.tokens length, when the server sent one
  // choices[0].token_ids when asked for (parse_completion_chunk's keep_ids) and every entry is an
  // integer that fits an int32 (empty otherwise): what a conversation's next turn resends
  // (arrival_schedule.h).
  std::vector<int32_t> token_ids;
  std::optional<uint32_t> usage_completion_tokens;  // usage.completion_tokens (running or final)
  // usage.prompt_tokens_details.cached_tokens (OpenAI's; Headway's; vLLM's behind a flag)
  std::optional<uint32_t> usage_cached_tokens;
  std::optional<std::string> finish_reason;  // null in the JSON reads as absent
  std::optional<std::string> error;          // message of an {"error": ...} payload
};

// Parses one payload ("[DONE]" is the caller's to recognise). Throws core::Error quoting the start
// of the payload when it is not a JSON object or a field has the wrong type.
// `keep_ids`: fill token_ids (only a stream whose ids are resent pays for them).
CompletionChunk parse_completion_chunk(std::string_view data, bool keep_ids = false);

}  // namespace headway::serving::bench
