// The second stage of the chat-template interpreter: tokens -> syntax tree. What Jinja refuses when
// it compiles a template is refused here, at load time, with the line and the construct:
// statements other than if/for/set/macro/break/continue/filter/generation, and unknown filters and
// tests, except those inside an if statement or a conditional expression, which fail only if they
// run (as in Jinja). Unknown methods and functions fail when called, as Jinja looks them up then.
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
