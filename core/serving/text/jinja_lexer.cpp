#include "jinja_lexer.h"

#include <headway/core/utf8.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

namespace headway::serving::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Lexer {
 public:
  Lexer(std::string_view source, LexerOptions options) : src_(source), options_(options) {
    // Jinja drops one trailing newline (keep_trailing_newline is off by default).
    if (src_.ends_with('\n')) src_.remove_suffix(1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      lex_text(tag);
      if (tag == std::string_view::npos) break;
      lex_tag(tag);
    }
    tokens_.push_back({Token::Kind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string_view::npos;
  }

  void advance_to(size_t to) {
    line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + to, '\n'));
    pos_ = to;
  }

  // Emits the text up to `tag` (or the end) after the whitespace control of the tags around it.
  void lex_text(size_t tag) {
    const size_t end = tag == std::string_view::npos ? src_.size() : tag;
    const int line = line_;
    std::string_view text = src_.substr(pos_, end - pos_);
    if (strip_next_) {
      while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    } else if (trim_next_newline_) {
      if (text.starts_with("\r\n")) {
        text.remove_prefix(2);
      } else if (text.starts_with('\n')) {
        text.remove_prefix(1);
      }
    }
    strip_next_ = trim_next_newline_ = false;
    if (tag != std::string_view::npos && tag + 2 < src_.size()) {
      const char kind = src_[tag + 1];
      const char modifier = src_[tag + 2];
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
      } else if (options_.lstrip_blocks && kind != '{' && modifier != '+') {
        // Only spaces and tabs between the start of the line and the tag go.
        const size_t line_start = text.find_last_of('\n');
        const std::string_view last_line =
            line_start == std::string_view::npos ? text : text.substr(line_start + 1);
        // After trim_blocks removed the previous tag's newline, the text starts a line.
        const size_t offset = static_cast<size_t>(text.data() - src_.data());
        const bool at_line_start =
            line_start != std::string_view::npos || offset == 0 || src_[offset - 1] == '\n';
        if (at_line_start && std::all_of(last_line.begin(), last_line.end(),
                                         [](char c) { return c == ' ' || c == '\t'; })) {
          text.remove_suffix(last_line.size());
        }
      }
    }
    if (!text.empty()) tokens_.push_back({Token::Kind::kText, std::string(text), line});
    advance_to(end);
  }

  void lex_tag(size_t tag) {
    const char kind = src_[tag + 1];
    const int open_line = line_;
    size_t body = tag + 2;
    if (body < src_.size() && (src_[body] == '-' || src_[body] == '+')) ++body;
    advance_to(body);
    if (kind == '#') {
      const size_t close = src_.find("#}", pos_);
      if (close == std::string_view::npos) {
        throw SyntaxError(open_line, "comment {# is never closed with #}");
      }
      strip_next_ = close > pos_ && src_[close - 1] == '-';
      trim_next_newline_ = options_.trim_blocks;
      advance_to(close + 2);
      return;
    }
    const bool expression = kind == '{';
    tokens_.push_back({expression ? Token::Kind::kExpressionOpen : Token::Kind::kStatementOpen,
                       expression ? "{{" : "{%", open_line});
    const std::string_view closer = expression ? "}}" : "%}";
    open_brackets_ = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) {
        throw SyntaxError(open_line, std::string(expression ? "{{" : "{%") +
                                         " is never closed with " + std::string(closer));
      }
      const std::string_view rest = src_.substr(pos_);
      // Inside brackets "}}" closes two dicts, not the tag ({{ f({'a': {'b': 1}}) }}), as
      // Jinja's lexer balances them.
      if (open_brackets_ > 0) {
        lex_inner();
        continue;
      }
      if ((rest.starts_with('-') || rest.starts_with('+')) && rest.substr(1).starts_with(closer)) {
        strip_next_ = rest.front() == '-';
        trim_next_newline_ = !expression && options_.trim_blocks && rest.front() != '+';
        tokens_.push_back(close_token(expression));
        advance_to(pos_ + 3);
        return;
      }
      if (rest.starts_with(closer)) {
        trim_next_newline_ = !expression && options_.trim_blocks;
        tokens_.push_back(close_token(expression));
        advance_to(pos_ + 2);
        return;
      }
      lex_inner();
    }
  }

  Token close_token(bool expression) const {
    return {expression ? Token::Kind::kExpressionClose : Token::Kind::kStatementClose,
            expression ? "}}" : "%}", line_};
  }

  // One name, literal or operator inside a tag.
  void lex_inner() {
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) {
        ++end;
      }
      tokens_.push_back({Token::Kind::kName, std::string(src_.substr(pos_, end - pos_)), line_});
      advance_to(end);
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = pos_;
      while (end < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end]))) ++end;
      const auto digit_at = [&](size_t i) {
        return i < src_.size() && std::isdigit(static_cast<unsigned char>(src_[i]));
      };
      bool is_float = false;
      if (end < src_.size() && src_[end] == '.' && digit_at(end + 1)) {
        is_float = true;
        ++end;
        while (digit_at(end)) ++end;
      }
      // An exponent (1e16, 2.5E-3) makes a float too.
      if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
        const size_t sign = end + 1 < src_.size() && (src_[end + 1] == '+' || src_[end + 1] == '-');
        if (digit_at(end + 1 + sign)) {
          is_float = true;
          end += 1 + sign;
          while (digit_at(end)) ++end;
        }
      }
      tokens_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInteger,
                         std::string(src_.substr(pos_, end - pos_)), line_});
      advance_to(end);
      return;
    }
    if (c == '\'' || c == '"') {
      lex_string(c);
      return;
    }
    static constexpr std::string_view kTwoChar[] = {"//", "==", "!=", "<=", ">=", "**"};
    for (std::string_view op : kTwoChar) {
      if (src_.substr(pos_).starts_with(op)) {
        tokens_.push_back({Token::Kind::kOperator, std::string(op), line_});
        advance_to(pos_ + 2);
        return;
      }
    }
    if (std::string_view("+-*/%~<>()[]{},.:|=").find(c) != std::string_view::npos) {
      if (c == '(' || c == '[' || c == '{') ++open_brackets_;
      if ((c == ')' || c == ']' || c == '}') && open_brackets_ > 0) --open_brackets_;
      tokens_.push_back({Token::Kind::kOperator, std::string(1, c), line_});
      advance_to(pos_ + 1);
      return;
    }
    throw SyntaxError(line_, std::string("unexpected character '") + c + "' inside a tag");
  }

  void lex_string(char quote) {
    const int line = line_;
    std::string value;
    size_t i = pos_ + 1;
    for (;; ++i) {
      if (i >= src_.size()) throw SyntaxError(line, "string literal is never closed");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (++i >= src_.size()) throw SyntaxError(line, "string literal is never closed");
      switch (src_[i]) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '\\':
        case '\'':
        case '"':
          value += src_[i];
          break;
        case 'x':
        case 'u':
        case 'U': {  // Python's \xXX, \uXXXX and \UXXXXXXXX: a code point, written as UTF-8
          const size_t digits = src_[i] == 'x' ? 2 : src_[i] == 'u' ? 4 : 8;
          uint32_t code = 0;
          const std::string_view hex = src_.substr(i + 1, digits);
          const auto parsed = std::from_chars(hex.data(), hex.data() + hex.size(), code, 16);
          if (hex.size() != digits || parsed.ptr != hex.data() + hex.size() || code > 0x10FFFF ||
              (code >= 0xD800 && code <= 0xDFFF)) {
            throw SyntaxError(line, std::string("escape sequence '\\") + src_[i] + "' needs " +
                                        std::to_string(digits) +
                                        " hex digits of a code point in a string literal");
          }
          core::utf8::append_code_point(code, value);
          i += digits;
          break;
        }
        case '\n':  // a backslash-newline continues the line, as in Python
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        default:
          if (src_[i] >= '0' && src_[i] <= '7') {  // Python's octal escape, up to three digits
            uint32_t code = 0;
            size_t digits = 0;
            while (digits < 3 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7') {
              code = code * 8 + static_cast<uint32_t>(src_[i] - '0');
              ++i;
              ++digits;
            }
            --i;
            core::utf8::append_code_point(code, value);
          } else {
            // Python keeps an unknown escape as written ('\d' is a backslash and a d).
            value += '\\';
            value += src_[i];
          }
      }
    }
    tokens_.push_back({Token::Kind::kString, std::move(value), line});
    advance_to(i + 1);
  }

  std::string_view src_;
  LexerOptions options_;
  size_t pos_ = 0;
  int line_ = 1;
  bool strip_next_ = false;         // the previous tag ended with '-'
  int open_brackets_ = 0;           // ( [ { opened and not yet closed in the current tag
  bool trim_next_newline_ = false;  // the previous tag was a block or comment (trim_blocks)
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, LexerOptions options) {
  return Lexer(source, options).run();
}

}  // namespace headway::serving::jinja
