// Turns the JSON body of POST /v1/responses (OpenAI's Responses API) into the chat request that
// runs it. A Responses request is a chat request written differently: its input items become chat
// messages (instructions a system message first, a function_call an assistant turn's tool call, a
// function_call_output a tool message), its flat function tools and text.format become the chat
// API's tools and response_format. The chat request then goes through parse_chat_request, so that
// both APIs check sampling fields, tools, schemas and templates alike; a refusal names the
// Responses field the client wrote (FieldRenames), not the chat field it became.
// docs/serving_http.md lists every field.
//
// Threading: pure functions, safe from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api_error.h"
#include "openai_request.h"
#include "response_store.h"

namespace headway::serving::http {

// Chat field paths and the Responses paths they came from ("messages[2].content" from
// "input[1].content"), so that an error found on the chat request names what the client sent.
class FieldRenames {
 public:
  void add(std::string chat_path, std::string responses_path);
  // `error` with its param and every field path its message names as the client wrote them. A
  // path that is a plain word ("messages", "logprobs") is renamed in the param only: in a message
  // it may be English, or a client's own string.
  ApiError apply(const ApiError& error) const;

 private:
  struct Rename {
    std::string from;  // the chat path
    std::string to;
  };
  // The rename of the longest whole chat path at text[at], or null (`in_message`: not a plain
  // word).
  const Rename* longest_at(std::string_view text, size_t at, bool in_message) const;
  std::string rename_all(std::string_view text, bool in_message) const;
  // By the path's first name ("messages" of "messages[2].content"): a message is read once,
  // looking only at the renames of the names it holds.
  std::unordered_map<std::string, std::vector<Rename>> by_name_;
};

// The request fields a response object repeats (OpenAI's Response), as the client set them or at
// their defaults.
struct ResponsesEcho {
  nlohmann::ordered_json instructions = nullptr;
  nlohmann::ordered_json max_output_tokens = nullptr;
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  bool parallel_tool_calls = true;
  nlohmann::ordered_json previous_response_id = nullptr;
  nlohmann::ordered_json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  // Whether the response is kept (as asked, true by default, when the server keeps responses).
  bool store = false;
  nlohmann::ordered_json temperature = 1.0;
  nlohmann::ordered_json text = {{"format", {{"type", "text"}}}};
  nlohmann::ordered_json tool_choice = "auto";
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  int32_t top_logprobs = 0;
  nlohmann::ordered_json top_p = 1.0;
  nlohmann::ordered_json user = nullptr;
};

struct ResponsesRequest {
  OpenAiRequest chat;  // what runs: input.request_id is a fresh "resp_..." id
  ResponsesEcho echo;
  // include "message.output_text.logprobs": each output_text carries its tokens' logprobs
  // (chat.input.sampling.logprobs is top_logprobs).
  bool logprobs = false;
  FieldRenames renames;
  // With echo.store: what the response is kept with (StoredResponse::input_items): the
  // conversation of previous_response_id, then this request's input items, each with an id.
  nlohmann::ordered_json input_items = nlohmann::ordered_json::array();
};

// Throws ApiError 400 naming the Responses field at fault, including for what Headway does not
// keep (conversation, background) and tools other than functions. `store`: the responses kept,
// which previous_response_id continues (400 previous_response_not_found when not kept there);
// null or keeping none: previous_response_id is refused and nothing is stored.
ResponsesRequest parse_responses_request(std::string_view body,
                                         const ResponseStore* store = nullptr);

}  // namespace headway::serving::http
