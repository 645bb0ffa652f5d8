// GPT-2's byte-level alphabet: every byte 0..255 is written as one printable Unicode character, so
// a byte-level BPE vocabulary is a set of printable strings. Printable Latin-1 bytes ('!'..'~',
// U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other 68 bytes (controls, space, 0x7F..
// 0xA0, 0xAD) take U+0100, U+0101, ... in byte order, so a space is 'Ġ' (U+0120) and a newline
// 'Ċ' (U+010A). Hugging Face's ByteLevel pre-tokenizer and decoder use exactly this table.
//
// Threading: the table is built once, immutable; the functions are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace headway::core::byte_level {

// The code point byte `b` is written as.
char32_t code_point_of(uint8_t b);
// The UTF-8 text of that code point (1 or 2 bytes).
const std::string& symbol_of(uint8_t b);
// Maps every byte of `bytes` to its symbol and concatenates them.
std::string encode(std::string_view bytes);
// The inverse of encode: the byte each symbol stands for. nullopt when `symbols` is not a
// concatenation of the alphabet's symbols (a vocabulary entry that is not byte-level).
std::optional<std::string> decode(std::string_view symbols);

}  // namespace headway::core::byte_level
