// The read position in a notation's text that guided decoding's hand-written parsers share
// (regular expressions, regex_syntax.h; grammars, ebnf_syntax.h): a parser derives from it and
// reads the text through it.
//
// Threading: a reader is one parse's, on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace headway::serving::guided {

class TextReader {
 protected:
  explicit TextReader(std::string_view text) : text_(text) {}

  bool more() const { return at_ < text_.size(); }
  char peek() const { return text_[at_]; }
  bool eat(char c) {
    if (more() && peek() == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool starts_with(std::string_view prefix) const {
    return text_.substr(at_, prefix.size()) == prefix;
  }
  // Reads `count` hex digits (an escape's \xHH, \uHHHH) into `value`; false where fewer come
  // (the reader then stands at the first that is not one).
  bool read_hex(size_t count, uint32_t& value) {
    value = 0;
    for (size_t i = 0; i < count; ++i) {
      const char c = more() ? peek() : '\0';
      uint32_t digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<uint32_t>(c - '0');
      } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
        digit = static_cast<uint32_t>((c | 0x20) - 'a' + 10);
      } else {
        return false;
      }
      value = value << 4 | digit;
      ++at_;
    }
    return true;
  }

  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace headway::serving::guided
