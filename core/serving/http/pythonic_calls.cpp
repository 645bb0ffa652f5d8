#include "pythonic_calls.h"

#include <headway/serving/json_text.h>

#include <nlohmann/json.hpp>

namespace headway::serving::http {
namespace {

constexpr std::string_view kPythonStart = "<|python_start|>";
constexpr std::string_view kPythonEnd = "<|python_end|>";

// Recursive descent over the text; every method returns false where the text is not the format.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool calls(std::vector<PythonicCall>& out) {
    skip_space();
    if (!take('[')) return false;
    skip_space();
    while (!take(']')) {
      PythonicCall call;
      if (!identifier(call.name) || !call_arguments(call.arguments)) return false;
      out.push_back(std::move(call));
      skip_space();
      if (take(',')) {
        skip_space();
      } else if (peek() != ']') {
        return false;
      }
    }
    skip_space();
    return at_ == text_.size() && !out.empty();
  }

 private:
  bool call_arguments(std::string& arguments) {
    skip_space();
    if (!take('(')) return false;
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    skip_space();
    while (!take(')')) {
      std::string key;
      nlohmann::ordered_json value;
      if (!identifier(key)) return false;
      skip_space();
      if (!take('=')) return false;
      skip_space();
      if (!literal(value, 1)) return false;
      object[key] = std::move(value);
      skip_space();
      if (take(',')) {
        skip_space();
      } else if (peek() != ')') {
        return false;
      }
    }
    try {
      arguments = object.dump();
    } catch (const nlohmann::json::type_error&) {
      return false;  // a string that is not UTF-8 is no call (the model's text decoder makes
                     // its text valid UTF-8: only a direct caller meets this; helper-129)
    }
    return true;
  }

  bool literal(nlohmann::ordered_json& out, int depth) {
    if (depth > kMaxJsonDepth) return false;
    const char c = peek();
    if (c == '"' || c == '\'') {
      std::string text;
      if (!string(text)) return false;
      out = std::move(text);
      return true;
    }
    if (c == '[' || c == '(') return sequence(out, depth, c == '[' ? ']' : ')');
    if (c == '{') return dict(out, depth);
    if (word("True")) {
      out = true;
      return true;
    }
    if (word("False")) {
      out = false;
      return true;
    }
    if (word("None")) {
      out = nullptr;
      return true;
    }
    return number(out);
  }

  bool sequence(nlohmann::ordered_json& out, int depth, char close) {
    ++at_;  // '[' or '('
    out = nlohmann::ordered_json::array();
    skip_space();
    while (!take(close)) {
      nlohmann::ordered_json item;
      if (!literal(item, depth + 1)) return false;
      out.push_back(std::move(item));
      skip_space();
      if (take(',')) {
        skip_space();
      } else if (peek() != close) {
        return false;
      }
    }
    return true;
  }

  bool dict(nlohmann::ordered_json& out, int depth) {
    ++at_;  // '{'
    out = nlohmann::ordered_json::object();
    skip_space();
    while (!take('}')) {
      std::string key;
      nlohmann::ordered_json value;
      if (!string(key)) return false;  // JSON keys are strings
      skip_space();
      if (!take(':')) return false;
      skip_space();
      if (!literal(value, depth + 1)) return false;
      out[key] = std::move(value);
      skip_space();
      if (take(',')) {
        skip_space();
      } else if (peek() != '}') {
        return false;
      }
    }
    return true;
  }

  // A quoted string with Python's common escapes; \x and \u give the code point in UTF-8.
  bool string(std::string& out) {
    const char quote = peek();
    if (quote != '"' && quote != '\'') return false;
    ++at_;
    while (at_ < text_.size()) {
      const char c = text_[at_++];
      if (c == quote) return true;
      if (c == '\n') return false;  // a plain string does not span lines
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) return false;
      const char e = text_[at_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
        case '\'':
        case '"':
          out += e;
          break;
        case 'x':
        case 'u': {
          const size_t digits = e == 'x' ? 2 : 4;
          if (at_ + digits > text_.size()) return false;
          uint32_t code = 0;
          for (size_t i = 0; i < digits; ++i) {
            const char h = text_[at_++];
            const int value = h >= '0' && h <= '9'   ? h - '0'
                              : h >= 'a' && h <= 'f' ? h - 'a' + 10
                              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                     : -1;
            if (value < 0) return false;
            code = code * 16 + static_cast<uint32_t>(value);
          }
          if (code >= 0xD800 && code <= 0xDFFF) return false;  // a lone surrogate is no text
          append_utf8(out, code);
          break;
        }
        default:  // Python keeps an unknown escape as written
          out += '\\';
          out += e;
      }
    }
    return false;
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  // An integer or a float as Python writes them (no leading '+', digits before any '.').
  bool number(nlohmann::ordered_json& out) {
    const size_t start = at_;
    if (peek() == '-') ++at_;
    const size_t digits = at_;
    while (is_digit(peek())) ++at_;
    if (at_ == digits) {
      at_ = start;
      return false;
    }
    bool floating = false;
    if (peek() == '.') {
      floating = true;
      ++at_;
      while (is_digit(peek())) ++at_;
    }
    if (peek() == 'e' || peek() == 'E') {
      floating = true;
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      const size_t exponent = at_;
      while (is_digit(peek())) ++at_;
      if (at_ == exponent) return false;
    }
    std::string written(text_.substr(start, at_ - start));
    if (floating && written.back() == '.') written += '0';  // "2." is Python's 2.0
    out = nlohmann::ordered_json::parse(written, nullptr, /*allow_exceptions=*/false);
    return !out.is_discarded();
  }

  bool identifier(std::string& out) {
    const size_t start = at_;
    while (at_ < text_.size()) {
      const char c = text_[at_];
      const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      if (!letter && !(at_ > start && is_digit(c))) break;
      ++at_;
    }
    out.assign(text_.substr(start, at_ - start));
    return !out.empty();
  }

  // The keyword `w`, not the start of a longer name.
  bool word(std::string_view w) {
    if (!text_.substr(at_).starts_with(w)) return false;
    const char after = at_ + w.size() < text_.size() ? text_[at_ + w.size()] : ' ';
    if ((after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') || after == '_' ||
        is_digit(after)) {
      return false;
    }
    at_ += w.size();
    return true;
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  bool take(char c) {
    if (peek() != c) return false;
    ++at_;
    return true;
  }
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t' || text_[at_] == '\r')) {
      ++at_;
    }
  }

  std::string_view text_;
  size_t at_ = 0;
};

std::string_view trimmed(std::string_view text) {
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return {};
  return text.substr(start, text.find_last_not_of(" \t\r\n") + 1 - start);
}

}  // namespace

std::optional<std::vector<PythonicCall>> parse_pythonic_calls(std::string_view text) {
  text = trimmed(text);
  if (text.starts_with(kPythonStart)) {
    text.remove_prefix(kPythonStart.size());
    if (text.ends_with(kPythonEnd)) text.remove_suffix(kPythonEnd.size());
  }
  std::vector<PythonicCall> calls;
  if (!Reader(text).calls(calls)) return std::nullopt;
  return calls;
}

}  // namespace headway::serving::http
