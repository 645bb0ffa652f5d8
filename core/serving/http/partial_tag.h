// Text parsers that look for tags in a stream (tool calls, reasoning) hold back the end of what
// arrived when it may be the start of a tag the next piece completes.
//
// Threading: a pure function.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace headway::serving::http {

// The length of the longest end of `text` that `tag` starts with, shorter than the tag: "<tool_"
// of "<tool_call>". 0 when none.
inline size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (tag.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

}  // namespace headway::serving::http
