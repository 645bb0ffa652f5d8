#include "chunk_stream_format.h"

#include <utility>

#include "api_error.h"

namespace headway::serving::http {

std::string ChunkStreamFormat::opening(uint32_t choices, const Usage& usage) {
  std::string events;
  // The chat role chunks go out at once, so clients see the stream open before the first token.
  if (header_.endpoint != Endpoint::kChatCompletions) return events;
  for (uint32_t i = 0; i < choices; ++i) {
    events += sse_event(role_chunk_json(
        header_, i, usage,
        i < prompt_token_ids_.size() ? prompt_token_ids_[i] : std::span<const int32_t>()));
  }
  return events;
}

std::string ChunkStreamFormat::delta(const StreamDelta& delta) {
  static const StopReason kNoStopReason;
  std::span<const int32_t> prompt_ids;
  if (header_.endpoint == Endpoint::kCompletions && delta.index < prompt_token_ids_.size()) {
    prompt_ids = std::exchange(prompt_token_ids_[delta.index], {});
  }
  return sse_event(delta_chunk_json(
      header_, delta.index, delta.content, delta.token_ids, delta.finish,
      delta.stop_reason != nullptr ? *delta.stop_reason : kNoStopReason, delta.usage,
      delta.logprobs != nullptr ? std::move(*delta.logprobs) : nlohmann::ordered_json(nullptr),
      delta.parsed, prompt_ids));
}

std::string ChunkStreamFormat::closing(const Usage& usage) {
  std::string events;
  if (header_.include_usage) events += sse_event(usage_chunk_json(header_, usage));
  return events + kSseDone;
}

std::string ChunkStreamFormat::failure(const ApiError& error) {
  return sse_event(error_json(error)) + kSseDone;
}

}  // namespace headway::serving::http
