// The fields of an OpenAI request that constrain its output: OpenAI's response_format
// ({"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": ...}}), vLLM's
// guided_json, guided_choice, guided_regex and guided_grammar, and vLLM's structured_outputs (json,
// regex, choice, grammar, json_object). The service compiles what they ask for (guided decoding).
//
// Threading: pure function, safe from any thread.
#pragma once

#include <headway/serving/generation_service.h>

#include <nlohmann/json.hpp>
#include <string_view>

namespace headway::serving::http {

// The guided output `json` (the body, parsed from `body`) asks for; kind kNone when none. A schema
// keeps the client's key order (declared properties are generated in it). Throws ApiError 400
// naming the field for a malformed one and for more than one of them.
GuidedOutput parse_guided_output(const nlohmann::json& json, std::string_view body);

}  // namespace headway::serving::http
