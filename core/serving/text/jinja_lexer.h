// The first stage of the chat-template interpreter: template source -> tokens. Text between tags
// becomes one kText token with Jinja's whitespace control already applied ({%- -%}, and the
// trim_blocks / lstrip_blocks options Hugging Face renders chat templates with); the inside of
// {{ }} and {% %} becomes names, literals and operators; {# comments #} disappear.
//
// Threading: pure function.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving::jinja {

// A malformed or unsupported template; `line` is 1-based.
struct SyntaxError : std::runtime_error {
  SyntaxError(int line, const std::string& message) : std::runtime_error(message), line(line) {}
  int line;
};

struct Token {
  enum class Kind {
    kText,
    kExpressionOpen,   // {{
    kExpressionClose,  // }}
    kStatementOpen,    // {%
    kStatementClose,   // %}
    kName,             // identifiers and keywords (for, in, and, true, none, ...)
    kString,           // text holds the unescaped value
    kInteger,
    kFloat,
    kOperator,  // + - * / // % ~ == != < <= > >= ( ) [ ] { } , . : | =
    kEnd,
  };
  Kind kind;
  std::string text;
  int line;
};

struct LexerOptions {
  bool trim_blocks = true;    // drop the newline right after a block tag
  bool lstrip_blocks = true;  // drop spaces and tabs before a block tag at the start of a line
};

// Throws SyntaxError for an unclosed tag, comment or string, or a character that starts no token.
std::vector<Token> tokenize(std::string_view source, LexerOptions options = {});

}  // namespace headway::serving::jinja
