// UTF-8 validation for text that reaches people and JSON: generated text, client input repeated in
// an error message, a plugin's error message.
//
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace headway::core::utf8 {

// The length of the trailing bytes of `bytes` that start a valid multi-byte character without
// finishing it (0 to 3): what may still become a character when more bytes arrive.
size_t incomplete_tail(std::string_view bytes);

// Appends `bytes` to `out`, replacing what is not part of a valid UTF-8 character (stray
// continuation bytes, overlong forms, surrogates, truncated sequences) with U+FFFD: one per maximal
// subpart (a truncated character's valid beginning is one), as Python's "replace" does, so
// appending in pieces cut before any incomplete_tail() gives the same text as appending at once.
void append_valid(std::string_view bytes, std::string& out);

// True when `bytes` is entirely valid UTF-8.
bool is_valid(std::string_view bytes);

// The bytes of `bytes` that begin a character (every byte but continuation bytes): for valid
// UTF-8, its code points, what Python's len() of a str counts.
size_t code_points(std::string_view bytes);

// The length of the complete, valid character `bytes` starts with (1 to 4), or 0 when it does not
// start with one (an invalid byte, or a character cut short).
size_t complete_length(std::string_view bytes);

// The code point of the character `bytes` starts with. Precondition: complete_length(bytes) > 0.
char32_t first_code_point(std::string_view bytes);

// Appends code point `c` as UTF-8. Precondition: `c` is a Unicode scalar value (at most
// U+10FFFF and not a surrogate).
void append_code_point(char32_t c, std::string& out);

}  // namespace headway::core::utf8
