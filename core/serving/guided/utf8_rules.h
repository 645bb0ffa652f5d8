// UTF-8 as guided decoding accepts it inside JSON strings: shortest forms only, no surrogates
// (U+D800 to U+DFFF), nothing above U+10FFFF (RFC 3629). The matcher and the vocabulary's
// plain-text classification must agree byte for byte, so both read these rules.
//
// Threading: constexpr functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace headway::serving::guided {

// Continuation bytes a lead byte needs: 1 to 3; 0 when it cannot lead a character.
constexpr uint8_t utf8_continuations(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 1;
  if (lead >= 0xE0 && lead <= 0xEF) return 2;
  if (lead >= 0xF0 && lead <= 0xF4) return 3;
  return 0;
}

// The range of the byte right after `lead` (the later ones are 0x80 to 0xBF).
struct ByteRange {
  uint8_t low;
  uint8_t high;
};
constexpr ByteRange utf8_second_byte(uint8_t lead) {
  switch (lead) {
    case 0xE0:
      return {0xA0, 0xBF};  // shorter forms would be overlong
    case 0xED:
      return {0x80, 0x9F};  // A0 to BF would be surrogates
    case 0xF0:
      return {0x90, 0xBF};  // overlong
    case 0xF4:
      return {0x80, 0x8F};  // above U+10FFFF
    default:
      return {0x80, 0xBF};
  }
}

// The character that starts `text` at `at`: its length in bytes (1 to 4), with its value in
// `value`; 0 when the bytes there are not a shortest-form UTF-8 scalar value.
constexpr size_t decode_utf8(std::string_view text, size_t at, uint32_t& value) {
  if (at >= text.size()) return 0;
  const auto lead = static_cast<uint8_t>(text[at]);
  const size_t length = lead < 0x80 ? 1 : utf8_continuations(lead) + size_t{1};
  if (length == 1 && lead >= 0x80) return 0;
  if (at + length > text.size()) return 0;
  uint32_t decoded = length == 1 ? lead : lead & (0x7Fu >> length);
  for (size_t i = 1; i < length; ++i) {
    const auto next = static_cast<uint8_t>(text[at + i]);
    if ((next & 0xC0) != 0x80) return 0;
    decoded = decoded << 6 | (next & 0x3F);
  }
  constexpr uint32_t kShortest[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (decoded < kShortest[length] || decoded > 0x10FFFF ||
      (decoded >= 0xD800 && decoded <= 0xDFFF)) {
    return 0;
  }
  value = decoded;
  return length;
}

}  // namespace headway::serving::guided
