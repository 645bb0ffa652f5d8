#include "headway/core/utf8.h"

#include <cstdint>

namespace headway::core::utf8 {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The length of the character a lead byte announces, 0 for a byte that cannot start one.
size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether `second` may follow `lead` (Unicode Table 3-7: no overlongs, surrogates or > U+10FFFF).
bool valid_second(uint8_t lead, uint8_t second) {
  switch (lead) {
    case 0xE0:
      return second >= 0xA0 && second <= 0xBF;
    case 0xED:
      return second >= 0x80 && second <= 0x9F;
    case 0xF0:
      return second >= 0x90 && second <= 0xBF;
    case 0xF4:
      return second >= 0x80 && second <= 0x8F;
    default:
      return (second & 0xC0) == 0x80;
  }
}

// How many bytes at `bytes[i]` begin a valid character: all of it (`complete`), or its maximal
// subpart, the bytes before the first one that cannot continue it or before the end. Stopping at
// that byte rather than giving up on the lead makes a truncated character one U+FFFD whether the
// byte that cuts it arrives in the same read or a later one (Unicode's "substitution of maximal
// subparts", which Python and WHATWG decoders follow).
size_t valid_prefix(std::string_view bytes, size_t i, bool& complete) {
  const auto lead = static_cast<uint8_t>(bytes[i]);
  const size_t length = sequence_length(lead);
  complete = false;
  if (length == 0) return 0;
  size_t n = 1;
  while (n < length && i + n < bytes.size()) {
    const auto b = static_cast<uint8_t>(bytes[i + n]);
    if (n == 1 ? !valid_second(lead, b) : (b & 0xC0) != 0x80) return n;
    ++n;
  }
  complete = n == length;
  return n;
}

}  // namespace

size_t incomplete_tail(std::string_view bytes) {
  const size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t i = bytes.size(); i-- > from;) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back for the lead
    bool complete = false;
    const size_t n = valid_prefix(bytes, i, complete);
    return (n == bytes.size() - i && !complete) ? n : 0;
  }
  return 0;
}

void append_valid(std::string_view bytes, std::string& out) {
  out.reserve(out.size() + bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    bool complete = false;
    const size_t n = valid_prefix(bytes, i, complete);
    if (complete) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append(kReplacement);
      i += n > 0 ? n : 1;  // a truncated character is one replacement, as decoders usually do
    }
  }
}

size_t complete_length(std::string_view bytes) {
  if (bytes.empty()) return 0;
  bool complete = false;
  const size_t n = valid_prefix(bytes, 0, complete);
  return complete ? n : 0;
}

char32_t first_code_point(std::string_view bytes) {
  const auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(bytes[i])); };
  const size_t length = sequence_length(static_cast<uint8_t>(bytes[0]));
  if (length == 1) return byte(0);
  char32_t c = byte(0) & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < length; ++i) c = (c << 6) | (byte(i) & 0x3F);
  return c;
}

void append_code_point(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

size_t code_points(std::string_view bytes) {
  size_t n = 0;
  for (const char byte : bytes) n += (static_cast<uint8_t>(byte) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

bool is_valid(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    bool complete = false;
    const size_t n = valid_prefix(bytes, i, complete);
    if (!complete) return false;
    i += n;
  }
  return true;
}

}  // namespace headway::core::utf8
