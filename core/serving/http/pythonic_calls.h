// The "pythonic" tool-call format of Llama 3.2 and Llama 4 (vLLM's `pythonic` parser): the answer
// is a Python list of calls with keyword arguments, `[get_weather(city="Paris", days=2), now()]`,
// optionally between Llama 4's "<|python_start|>" and "<|python_end|>". Argument values are
// Python literals: strings ('...' or "...", with backslash escapes), numbers, True, False, None,
// and lists and dicts of them; they become JSON (a dict's keys must be strings).
//
// Threading: a pure function.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace headway::serving::http {

struct PythonicCall {
  std::string name;
  std::string arguments;  // JSON text of an object, keys in the order written
};

// The calls when the whole of `text` (surrounding whitespace aside) is such a list of at least
// one call; nullopt otherwise (then the answer is text). Nesting deeper than 128 is not a call.
std::optional<std::vector<PythonicCall>> parse_pythonic_calls(std::string_view text);

}  // namespace headway::serving::http
