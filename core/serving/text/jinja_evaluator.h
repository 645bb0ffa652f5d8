// The third stage of the chat-template interpreter: renders a parsed template with global
// variables (messages, bos_token, ...). Scoping follows Jinja: a for loop's body has its own scope
// per iteration, so a variable set inside it is gone after the loop (templates use namespace()
// to carry state out), while if-blocks share the enclosing scope.
//
// Threading: render() only reads the tree and the globals; concurrent renders are safe.
#pragma once

#include <string>
#include <vector>

#include "jinja_ast.h"

namespace headway::serving::jinja {

// Throws TemplateException when the template calls raise_exception(message), RenderError (with the
// line) when an operation fails (arithmetic on undefined, wrong types, output over 64 MiB).
std::string render(const std::vector<Node>& nodes, const Names& globals);

}  // namespace headway::serving::jinja
