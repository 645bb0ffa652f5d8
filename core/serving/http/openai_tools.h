// The tool-calling fields of an OpenAI chat request: "tools", "tool_choice",
// "parallel_tool_calls", and the messages that carry calls and their results (an assistant turn's
// "tool_calls", a "tool" message's "tool_call_id"). The tools and those fields go to the chat
// template as JSON (GenerateInput::tools_json, ChatMessage::fields_json); which calls the answer
// makes is the ToolCallParser's to find (tool_call_parser.h).
//
// Threading: pure functions, safe from any thread.
#pragma once

#include <headway/serving/generation_service.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "json_fields.h"
#include "tool_call_parser.h"

namespace headway::serving::http {

struct ToolRequest {
  std::string tools_json;  // the tools as given (a JSON array), empty when none
  // tool_choice "auto" (the default with tools): the answer's calls are parsed out of its text.
  // "none": the tools are still rendered into the prompt (as vLLM does), the text is left as is.
  bool parse_calls = false;
  bool parallel_calls = true;  // parallel_tool_calls; false: at most one call per answer
  // tool_choice "required" (kCallList) or naming a function (kNamedArguments, `function`): the
  // answer is forced into calls by guided decoding (`guided`), and read by that parser whatever
  // the server's own.
  std::optional<ToolCallFormat> forced_format;
  std::string function;
  GuidedOutput guided;
};

// Reads tools, tool_choice and parallel_tool_calls; throws ApiError 400 naming the field for a
// malformed tool, a tool_choice that is not "none", "auto", "required" or {"type": "function",
// "function": {"name": ...}}, a forced choice without tools or naming none of them, and a tool
// whose parameters guided decoding cannot force (naming the part of the schema). The older
// "functions" and "function_call" are refused by name.
// `body`: the same body parsed keeping its key order (what the template gets is the client's
// JSON, in the client's order).
ToolRequest parse_tool_request(const FieldReader& fields, const nlohmann::ordered_json& body);

// The fields of message `message` (at `path`, role `role`) that a template reads besides role and
// content, as a JSON object's text, or empty when it has none: an assistant turn's tool_calls
// (each function's "arguments" parsed from the JSON text OpenAI sends into an object, as vLLM
// gives templates), a tool message's tool_call_id (required), any message's name, and an
// assistant turn's earlier thinking ("reasoning" or "reasoning_content", given under both). Throws
// ApiError 400 naming the field when one is malformed or on the wrong role.
// `ordered_message`: the same message in the client's key order.
std::string parse_message_fields(const nlohmann::json& message,
                                 const nlohmann::ordered_json& ordered_message,
                                 const std::string& path, const std::string& role);

}  // namespace headway::serving::http
