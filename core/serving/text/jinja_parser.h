// The second stage of the chat-template interpreter: tokens -> syntax tree. Everything the
// evaluator cannot do is refused here, at load time, with the line and the construct: statements
// other than if/for/set/macro/break/continue/filter/generation, unknown filters, tests, functions
// and methods. A template that parses renders without "unsupported" surprises.
//
// Threading: pure function.
#pragma once

#include <vector>

#include "jinja_ast.h"
#include "jinja_lexer.h"

namespace headway::serving::jinja {

// Throws SyntaxError naming the line and what is wrong.
std::vector<Node> parse(const std::vector<Token>& tokens);

}  // namespace headway::serving::jinja
