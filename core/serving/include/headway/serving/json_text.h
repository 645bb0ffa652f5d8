// JSON text from outside (request bodies, a model's tool calls, the JSON a gRPC client sends for
// the chat template) is checked on the text before anything is built from it, and parsed without
// the costs that a hostile text could make unbounded.
//
// Threading: pure functions, safe from any thread.
#pragma once

#include <headway/sdk/json_depth.hpp>
#include <nlohmann/json.hpp>
#include <string_view>

namespace headway::serving {

// Deeper than any OpenAI request (messages, content parts, tool schemas) nests. Parsing is
// iterative, but dumping, comparing and rendering values recurse once per level.
inline constexpr int kMaxJsonDepth = 128;

// Whether objects and arrays in `text` nest more than `limit` levels deep (the SDK's, shared with
// the file readers). A callback given to nlohmann's parse could refuse as it reads, but its
// callback parser rescans an object's parent at every object's end, which made an array of
// 100,000 chat messages take 1.7 s, 80 s under ASan.
using sdk::json_nests_deeper_than;

// Where the object or array that opens at text[start] ends (one past its closing bracket), its
// brackets counted outside strings; npos when it does not end within `text`. For finding one
// value among text that follows it (Llama 3's "{...}; {...}").
size_t json_container_end(std::string_view text, size_t start);

// `text` parsed keeping every object's keys in the order written, as Python's json.loads does (a
// key written twice keeps its first place and its last value). Linear in the text: nlohmann's own
// ordered_json looks each key up among the keys before it, so one object of 80,000 keys took
// 10 s. Returns a discarded value (is_discarded()) when `text` is not JSON or nests deeper than
// kMaxJsonDepth.
nlohmann::ordered_json parse_json_keeping_order(std::string_view text);

}  // namespace headway::serving
