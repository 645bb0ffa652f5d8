// The bodies of OpenAI's Responses API as Headway answers them: the response object (object
// "response") and its output items (reasoning, message, function_call). ResponsesStreamFormat
// builds a response from these as its events go out, for a stream and for a whole answer alike.
//
// Threading: plain values and pure functions.
#pragma once

#include <headway/serving/request_stream.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "responses_request.h"
#include "tool_call_parser.h"

namespace headway::serving::http {

// What every response object of one request repeats.
struct ResponseHead {
  std::string id;  // "resp_..."
  int64_t created_at = 0;
  std::string model;
  ResponsesEcho echo;
};

enum class ResponseStatus { kInProgress, kCompleted, kIncomplete, kFailed };

// "in_progress", "completed", "incomplete" or "failed": a response's status, and an output item's.
const char* status_name(ResponseStatus status);

// A reasoning_text part: the model's thinking.
nlohmann::ordered_json reasoning_text_json(const std::string& text);
// A reasoning item: the model's thinking as one reasoning_text part (no summary is written).
nlohmann::ordered_json reasoning_item_json(const std::string& id, const std::string& text,
                                           ResponseStatus status);
// An output_text part; `logprobs`: its tokens' (an array, empty when not asked for).
nlohmann::ordered_json output_text_json(const std::string& text,
                                        const nlohmann::ordered_json& logprobs);
// An assistant message item; `content`: its parts (an array).
nlohmann::ordered_json message_item_json(const std::string& id, ResponseStatus status,
                                         nlohmann::ordered_json content);
// A function_call item: its call_id is the call's id, which a function_call_output names.
nlohmann::ordered_json function_call_item_json(const std::string& id, const ToolCall& call,
                                               ResponseStatus status);

// usage: input_tokens (with cached_tokens), output_tokens (with reasoning_tokens) and their total.
nlohmann::ordered_json responses_usage_json(const Usage& usage, uint32_t reasoning_tokens);

// The response object. `incomplete`: why a kIncomplete response stopped ("max_output_tokens").
// `usage`: null while in progress. `error`: {"code", "message"} of a kFailed one, else null.
nlohmann::ordered_json response_json(const ResponseHead& head, ResponseStatus status,
                                     nlohmann::ordered_json output, nlohmann::ordered_json usage,
                                     nlohmann::ordered_json error = nullptr);

}  // namespace headway::serving::http
