#include "byte_level_alphabet.h"

#include <headway/core/utf8.h>

#include <unordered_map>

namespace headway::core::byte_level {
namespace {

struct Alphabet {
  std::array<char32_t, 256> code_points{};
  std::array<std::string, 256> symbols;
  std::unordered_map<char32_t, uint8_t> bytes;

  Alphabet() {
    char32_t next_free = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      code_points[b] = printable ? static_cast<char32_t>(b) : next_free++;
      symbols[b] = utf8(code_points[b]);
      bytes[code_points[b]] = static_cast<uint8_t>(b);
    }
  }

  static std::string utf8(char32_t cp) {
    std::string out;
    core::utf8::append_code_point(cp, out);
    return out;
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

}  // namespace

char32_t code_point_of(uint8_t b) { return alphabet().code_points[b]; }

const std::string& symbol_of(uint8_t b) { return alphabet().symbols[b]; }

std::string encode(std::string_view bytes) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += a.symbols[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> decode(std::string_view symbols) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(symbols.size());
  size_t i = 0;
  while (i < symbols.size()) {
    const auto lead = static_cast<uint8_t>(symbols[i]);
    char32_t cp = 0;
    if (lead < 0x80) {
      cp = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < symbols.size() &&
               (static_cast<uint8_t>(symbols[i + 1]) & 0xC0) == 0x80) {
      cp =
          (static_cast<char32_t>(lead & 0x1F) << 6) | (static_cast<uint8_t>(symbols[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::nullopt;  // three- and four-byte characters are not in the alphabet
    }
    const auto it = a.bytes.find(cp);
    if (it == a.bytes.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

}  // namespace headway::core::byte_level
