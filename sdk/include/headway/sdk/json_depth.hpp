// How deeply a JSON text nests, found on the text before it is parsed. Header-only, no dependency;
// for any plugin (or host code) that reads JSON from a file or a peer.
//
// Why: nlohmann's parser is iterative, but dump(), copying a value (json::value(key, default)
// copies the value it finds) and comparing recurse once per level, so a config.json or a
// safetensors header of a million '[' parses and then overflows the stack when an error message
// prints the bad value. A stack overflow cannot be caught; a check on the text can. (A callback
// given to parse() could refuse as it reads, but nlohmann's callback parser rescans an object's
// parent at every object's end: quadratic on a long array of objects.)
//
// Threading: pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace headway::sdk {

// Deeper than any model or tokenizer file nests (tokenizer.json's normalizer sequences, a chat
// template's tool schemas): a limit for files, far from the stack's.
inline constexpr int kMaxFileJsonDepth = 128;

// Calls on_depth(depth after it, position) for every bracket of `text` from `start` on, counted
// outside strings, until it returns true; returns that position, or npos when it never did.
template <typename OnDepth>
size_t scan_json_brackets(std::string_view text, size_t start, OnDepth on_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, a quote included
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (on_depth(++depth, i)) return i;
    } else if (c == ']' || c == '}') {
      if (on_depth(--depth, i)) return i;
    }
  }
  return std::string_view::npos;
}

// Whether objects and arrays in `text` nest more than `limit` levels deep, counted outside
// strings: one pass that builds nothing. Exact for valid JSON; on invalid JSON the parse that
// follows refuses what this lets through.
inline bool json_nests_deeper_than(std::string_view text, int limit) {
  return scan_json_brackets(text, 0, [limit](int depth, size_t) { return depth > limit; }) !=
         std::string_view::npos;
}

// What is wrong with `text` for a reader that allows `limit` levels ("objects and arrays nest more
// than 128 levels deep"), or empty: for a file reader's error message, before it parses.
inline std::string json_depth_problem(std::string_view text, int limit = kMaxFileJsonDepth) {
  if (!json_nests_deeper_than(text, limit)) return {};
  return "objects and arrays nest more than " + std::to_string(limit) + " levels deep";
}

}  // namespace headway::sdk
