#include "responses_json.h"

namespace headway::serving::http {

const char* status_name(ResponseStatus status) {
  switch (status) {
    case ResponseStatus::kInProgress:
      return "in_progress";
    case ResponseStatus::kCompleted:
      return "completed";
    case ResponseStatus::kIncomplete:
      return "incomplete";
    case ResponseStatus::kFailed:
      return "failed";
  }
  return "failed";
}

nlohmann::ordered_json reasoning_text_json(const std::string& text) {
  return {{"type", "reasoning_text"}, {"text", text}};
}

nlohmann::ordered_json reasoning_item_json(const std::string& id, const std::string& text,
                                           ResponseStatus status) {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  if (!text.empty()) content.push_back(reasoning_text_json(text));
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", nlohmann::ordered_json::array()},
          {"content", std::move(content)},
          {"encrypted_content", nullptr},
          {"status", status_name(status)}};
}

nlohmann::ordered_json output_text_json(const std::string& text,
                                        const nlohmann::ordered_json& logprobs) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", nlohmann::ordered_json::array()},
          {"logprobs", logprobs}};
}

nlohmann::ordered_json message_item_json(const std::string& id, ResponseStatus status,
                                         nlohmann::ordered_json content) {
  return {{"id", id},
          {"type", "message"},
          {"status", status_name(status)},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

nlohmann::ordered_json function_call_item_json(const std::string& id, const ToolCall& call,
                                               ResponseStatus status) {
  return {{"id", id},
          {"type", "function_call"},
          {"status", status_name(status)},
          {"call_id", call.id},
          {"name", call.name},
          {"arguments", status == ResponseStatus::kInProgress ? "" : call.arguments}};
}

nlohmann::ordered_json responses_usage_json(const Usage& usage, uint32_t reasoning_tokens) {
  return {{"input_tokens", usage.prompt_tokens},
          // cache_write_tokens: OpenAI's explicit cache writes, which Headway has none of; the
          // SDK's types require the field (docs/serving_http.md).
          {"input_tokens_details",
           {{"cached_tokens", usage.cached_prompt_tokens}, {"cache_write_tokens", 0}}},
          {"output_tokens", usage.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

nlohmann::ordered_json response_json(const ResponseHead& head, ResponseStatus status,
                                     nlohmann::ordered_json output, nlohmann::ordered_json usage,
                                     nlohmann::ordered_json error) {
  const ResponsesEcho& echo = head.echo;
  nlohmann::ordered_json incomplete = nullptr;
  if (status == ResponseStatus::kIncomplete) incomplete = {{"reason", "max_output_tokens"}};
  // OpenAI's Response, in its order. Nothing runs in the background, and no input is truncated.
  return {{"id", head.id},
          {"object", "response"},
          {"created_at", head.created_at},
          {"status", status_name(status)},
          {"background", false},
          {"error", std::move(error)},
          {"incomplete_details", std::move(incomplete)},
          {"instructions", echo.instructions},
          {"max_output_tokens", echo.max_output_tokens},
          {"max_tool_calls", nullptr},
          {"model", head.model},
          {"output", std::move(output)},
          {"parallel_tool_calls", echo.parallel_tool_calls},
          {"previous_response_id", echo.previous_response_id},
          {"reasoning", echo.reasoning},
          {"service_tier", "auto"},
          {"store", echo.store},
          {"temperature", echo.temperature},
          {"text", echo.text},
          {"tool_choice", echo.tool_choice},
          {"tools", echo.tools},
          {"top_logprobs", echo.top_logprobs},
          {"top_p", echo.top_p},
          {"truncation", "disabled"},
          {"usage", std::move(usage)},
          {"user", echo.user},
          {"metadata", echo.metadata}};
}

}  // namespace headway::serving::http
