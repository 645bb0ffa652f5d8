// The prompt part of an OpenAI chat request body, read outside a server: for tools that show the
// prompt a request makes (`headway chat-template`) with the very rules the HTTP frontend applies.
//
// Threading: a pure function.
#pragma once

#include <headway/serving/generation_service.h>

#include <string_view>

namespace headway::serving::http {

// `body`: a JSON object with "messages" and optionally "tools", "tool_choice",
// "chat_template_kwargs" and "model" (other fields of a chat completions request are read only as
// far as POST /tokenize reads them). Sets model, prompt_kind (kChat), messages, tools_json and
// template_kwargs_json, exactly as POST /v1/chat/completions and /tokenize do. Throws core::Error
// with the frontend's message, which names the field at fault, when the body is not such a request.
GenerateInput parse_chat_request_prompt(std::string_view body);

}  // namespace headway::serving::http
