// The syntax tree of a parsed chat template (output of jinja_parser, input of jinja_evaluator).
//
// Ownership: a tree owns its children. Threading: immutable once parsed; rendering only reads it,
// so one parsed template may be rendered by several threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja_value.h"

namespace headway::serving::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // args: the items; name "tuple" for (a, b), a list that prints as a tuple
    kDict,       // args: key, value, key, value, ...
    kAttribute,  // args[0].name
    kItem,       // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]], absent parts are null
    kUnary,      // name ("not", "-", "+") args[0]
    kBinary,     // args[0] name args[1]; name is the operator ("and", "==", "in", "not in", ...)
    kCondition,  // args[0] if args[1] else args[2] (args[2] may be null)
    kFilter,     // args[0] | name(args[1...], kwargs)
    kTest,       // args[0] is [not] name(args[1...])
    kCall,       // name(args, kwargs): a global function (raise_exception, namespace, range, ...)
    kMacroCall,  // name(args, kwargs): a {% macro %} of the template
    kMethod,     // args[0].name(args[1...], kwargs)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: "is not"
};

struct Node {
  enum class Kind {
    kText,    // text
    kOutput,  // {{ expr }}
    kIf,      // {% if conditions[0] %} bodies[0] {% elif conditions[1] %} ... {% else %} else_body
    kFor,     // {% for targets in expr [if condition] %} body {% else %} else_body {% endfor %}
    kSet,     // {% set targets[0][.targets[1]] = expr %}, or with no expr the rendered body
              // ({% set x %}body{% endset %})
    kMacro,   // {% macro text(targets[i] [= defaults[i]], ...) %} body {% endmacro %}
    kBreak,   // {% break %}, only inside a for loop's body
    kContinue,     // {% continue %}, likewise
    kGeneration,   // {% generation %} body {% endgeneration %}: the body, as written (Hugging Face
                   // marks the assistant's part of the prompt with it for training masks)
    kFilterBlock,  // {% filter expr.name(expr.args, expr.kwargs) %} body {% endfilter %}: the
                   // filter applied to the rendered body
  };
  Kind kind = Kind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<std::string> targets;
  std::vector<ExprPtr> defaults;  // kMacro: one per parameter, null where it has none
  ExprPtr condition;
  std::vector<ExprPtr> conditions;
  std::vector<std::vector<Node>> bodies;
  std::vector<Node> body;
  std::vector<Node> else_body;
};

}  // namespace headway::serving::jinja
