// How a stream's events are written: ChunkStreamFormat (the completions and chat APIs' chunks) or
// ResponsesStreamFormat (the Responses API's typed events). SseResponder reads the choices and
// decides what goes out and when; the format turns each step into the bytes of its SSE events.
//
// Threading: one per response, used by its SseResponder's thread only.
#pragma once

#include <headway/serving/request_stream.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "api_error.h"
#include "openai_response.h"

namespace headway::serving::http {

// What one choice gave since its previous delta.
struct StreamDelta {
  uint32_t index = 0;                  // the choice's
  std::string_view content;            // the text the client gets (after the answer parser)
  std::span<const int32_t> token_ids;  // the tokens generated since the previous delta
  Finish finish = Finish::kNone;       // set on the choice's last delta
  // With finish: the stop string or token that ended it (null: none). Borrowed for the call.
  const StopReason* stop_reason = nullptr;
  Usage usage;  // so far, over every choice
  // LogprobsJson::value of the tokens (null: not asked). Borrowed; the format may move it out.
  nlohmann::ordered_json* logprobs = nullptr;
  ParsedDelta parsed;  // reasoning and calls, when the answer is parsed
};

class StreamFormat {
 public:
  virtual ~StreamFormat() = default;
  // The events that open the stream, before any token.
  virtual std::string opening(uint32_t choices, const Usage& usage) = 0;
  // Every token choice `index` generated, as it arrives (before its delta, if it makes one).
  virtual void generated(uint32_t /*index*/, std::span<const int32_t> /*token_ids*/) {}
  virtual std::string delta(const StreamDelta& delta) = 0;
  // After the last choice's last delta: what ends a stream that succeeded.
  virtual std::string closing(const Usage& usage) = 0;
  // What ends a stream that failed: `error` as it would have been answered before the stream.
  virtual std::string failure(const ApiError& error) = 0;
};

}  // namespace headway::serving::http
