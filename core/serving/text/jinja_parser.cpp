#include "jinja_parser.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <set>
#include <utility>

#include "jinja_builtins.h"

namespace headway::serving::jinja {
namespace {

using Kind = Token::Kind;

// Names that are syntax, never variables.
const std::set<std::string, std::less<>> kKeywords = {
    "and",   "or",    "not",    "in",        "is",     "if",      "else",  "elif",
    "endif", "for",   "endfor", "set",       "endset", "true",    "false", "none",
    "True",  "False", "None",   "recursive", "macro",  "endmacro"};

// Statements Jinja has that this interpreter does not; named in the error.
const std::set<std::string, std::less<>> kUnsupportedStatements = {
    "call", "block", "extends", "include", "import", "from", "raw", "with", "autoescape", "do"};

// Bounds a macro's parameter list; the macros of chat templates take two or three.
constexpr size_t kMaxMacroParameters = 64;
constexpr int kMaxNesting = 300;
// Links of the operator, attribute and filter chains in one statement's expressions (a + b + c
// is two). A chain is parsed by a loop, not by recursion, but builds a tree as deep as it is long,
// which the evaluator and the tree's destructor walk recursively: 20,000 `+ 1` overflowed the
// stack at load (helper-129's fuzzing). With kMaxNesting this bounds one statement's depth; the
// evaluator bounds its own depth across macro calls (kMaxEvalDepth).
constexpr int kMaxChainLinks = 500;

// A statement node of `kind` at `line`, every other field empty.
Node node(Node::Kind kind, int line) {
  Node n;
  n.kind = kind;
  n.line = line;
  return n;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  std::vector<Node> parse_template() {
    collect_macro_names();
    std::vector<Node> nodes = parse_nodes({});
    if (!at(Kind::kEnd)) {
      throw SyntaxError(peek().line, "unexpected '{% " + stopped_at_ + " %}'");
    }
    return nodes;
  }

 private:
  // ---- tokens ----
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  bool at(Kind kind) const { return peek().kind == kind; }
  bool at_op(std::string_view op) const { return at(Kind::kOperator) && peek().text == op; }
  bool at_name(std::string_view name) const { return at(Kind::kName) && peek().text == name; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Kind::kText:
        return "text";
      case Kind::kExpressionClose:
        return "'}}'";
      case Kind::kStatementClose:
        return "'%}'";
      case Kind::kEnd:
        return "the end of the template";
      case Kind::kString:
        return "string '" + t.text + "'";
      default:
        return "'" + t.text + "'";
    }
  }
  [[noreturn]] void fail(const std::string& expected) const {
    throw SyntaxError(peek().line, "expected " + expected + ", found " + describe(peek()));
  }
  void expect_op(std::string_view op) {
    if (!at_op(op)) fail("'" + std::string(op) + "'");
    next();
  }
  void expect_name(std::string_view name) {
    if (!at_name(name)) fail("'" + std::string(name) + "'");
    next();
  }
  void expect(Kind kind, const std::string& what) {
    if (!at(kind)) fail(what);
    next();
  }
  std::string identifier(const std::string& what) {
    if (!at(Kind::kName) || kKeywords.contains(peek().text)) fail(what);
    return next().text;
  }

  // ---- statements ----

  // Every {% macro NAME %} of the template, so that a call to NAME parses wherever it is written:
  // Jinja defines a macro when its statement runs, so a macro may call one defined after it.
  void collect_macro_names() {
    for (size_t i = 0; i + 2 < tokens_.size(); ++i) {
      if (tokens_[i].kind == Kind::kStatementOpen && tokens_[i + 1].kind == Kind::kName &&
          tokens_[i + 1].text == "macro" && tokens_[i + 2].kind == Kind::kName) {
        macro_names_.insert(tokens_[i + 2].text);
      }
    }
  }

  // Parses nodes until a statement whose keyword is in `stops` (left unconsumed after "{%"; its
  // keyword is in stopped_at_) or the end.
  // Bounds the recursion of the parser, and of the evaluator over what it builds, well within the
  // stack: real templates nest a few levels.
  struct NestingGuard {
    explicit NestingGuard(Parser& p) : parser(p) {
      if (++parser.nesting_ > kMaxNesting) {
        throw SyntaxError(parser.peek().line, "the template nests more than " +
                                                  std::to_string(kMaxNesting) +
                                                  " levels of statements and expressions");
      }
    }
    ~NestingGuard() { --parser.nesting_; }
    Parser& parser;
  };

  std::vector<Node> parse_nodes(std::initializer_list<std::string_view> stops) {
    const NestingGuard guard(*this);
    std::vector<Node> nodes;
    // Each node's expressions count their chain links apart; a statement's resume after its body.
    const int links_before = chain_links_;
    while (!at(Kind::kEnd)) {
      chain_links_ = 0;
      const Token& t = peek();
      if (t.kind == Kind::kText) {
        Node n = node(Node::Kind::kText, t.line);
        n.text = t.text;
        nodes.push_back(std::move(n));
        next();
      } else if (t.kind == Kind::kExpressionOpen) {
        next();
        Node n = node(Node::Kind::kOutput, t.line);
        n.expr = parse_expression();
        expect(Kind::kExpressionClose, "'}}'");
        nodes.push_back(std::move(n));
      } else if (t.kind == Kind::kStatementOpen) {
        const Token& keyword = peek(1);
        if (keyword.kind != Kind::kName) {
          next();
          fail("a statement keyword");
        }
        for (std::string_view stop : stops) {
          if (keyword.text == stop) {
            next();
            next();
            stopped_at_ = keyword.text;
            chain_links_ = links_before;
            return nodes;
          }
        }
        next();
        nodes.push_back(parse_statement());
      } else {
        fail("text, '{{' or '{%'");
      }
    }
    stopped_at_.clear();
    chain_links_ = links_before;
    return nodes;
  }

  // One more link of a chain (see kMaxChainLinks).
  void link() {
    if (++chain_links_ > kMaxChainLinks) {
      throw SyntaxError(peek().line, "a statement chains more than " +
                                         std::to_string(kMaxChainLinks) +
                                         " operators, attribute reads and filters");
    }
  }

  Node parse_statement() {
    const Token& keyword = next();
    if (keyword.text == "if") return parse_if(keyword.line);
    if (keyword.text == "for") return parse_for(keyword.line);
    if (keyword.text == "set") return parse_set(keyword.line);
    if (keyword.text == "macro") return parse_macro(keyword.line);
    if (keyword.text == "break" || keyword.text == "continue") {
      return parse_loop_control(keyword.text, keyword.line);
    }
    if (keyword.text == "filter") {
      // {% filter name(args) %}: a filter call with the body as its target, filled in at render.
      Node n = node(Node::Kind::kFilterBlock, keyword.line);
      const Token& name = peek();
      if (name.kind != Kind::kName) fail("a filter name");
      next();
      n.expr = make(Expr::Kind::kFilter, name.line, name.text);
      if (at_op("(")) parse_arguments(*n.expr);
      expect(Kind::kStatementClose, "'%}'");
      n.body = parse_nodes({"endfilter"});
      if (stopped_at_ != "endfilter") unclosed("filter", keyword.line);
      expect(Kind::kStatementClose, "'%}'");
      return n;
    }
    if (keyword.text == "generation") {
      Node n = node(Node::Kind::kGeneration, keyword.line);
      expect(Kind::kStatementClose, "'%}'");
      // Jinja renders the body as a call block: a loop around it is not a loop in it.
      const int enclosing_loops = std::exchange(loop_depth_, 0);
      n.body = parse_nodes({"endgeneration"});
      loop_depth_ = enclosing_loops;
      if (stopped_at_ != "endgeneration") unclosed("generation", keyword.line);
      expect(Kind::kStatementClose, "'%}'");
      return n;
    }
    if (kUnsupportedStatements.contains(keyword.text)) {
      throw SyntaxError(keyword.line, "'{% " + keyword.text +
                                          " %}' is not supported by Headway's chat "
                                          "template interpreter");
    }
    throw SyntaxError(keyword.line, "unexpected '{% " + keyword.text + " %}'");
  }

  Node parse_if(int line) {
    Node n = node(Node::Kind::kIf, line);
    n.conditions.push_back(parse_expression());
    expect(Kind::kStatementClose, "'%}'");
    for (;;) {
      n.bodies.push_back(parse_nodes({"elif", "else", "endif"}));
      const std::string stop = stopped_at_;
      if (stop == "elif") {
        n.conditions.push_back(parse_expression());
        expect(Kind::kStatementClose, "'%}'");
      } else if (stop == "else") {
        expect(Kind::kStatementClose, "'%}'");
        n.else_body = parse_nodes({"endif"});
        if (stopped_at_ != "endif") unclosed("if", line);
        expect(Kind::kStatementClose, "'%}'");
        return n;
      } else if (stop == "endif") {
        expect(Kind::kStatementClose, "'%}'");
        return n;
      } else {
        unclosed("if", line);
      }
    }
  }

  Node parse_for(int line) {
    Node n = node(Node::Kind::kFor, line);
    n.targets.push_back(identifier("a loop variable"));
    while (at_op(",")) {
      next();
      n.targets.push_back(identifier("a loop variable"));
    }
    expect_name("in");
    n.expr = parse_or();
    if (at_name("if")) {
      next();
      n.condition = parse_or();
    }
    if (at_name("recursive")) {
      throw SyntaxError(peek().line, "recursive for loops are not supported");
    }
    expect(Kind::kStatementClose, "'%}'");
    ++loop_depth_;
    ++scope_depth_;
    n.body = parse_nodes({"else", "endfor"});
    --scope_depth_;
    --loop_depth_;
    if (stopped_at_ == "else") {
      expect(Kind::kStatementClose, "'%}'");
      n.else_body = parse_nodes({"endfor"});
    }
    if (stopped_at_ != "endfor") unclosed("for", line);
    expect(Kind::kStatementClose, "'%}'");
    return n;
  }

  Node parse_set(int line) {
    Node n = node(Node::Kind::kSet, line);
    n.targets.push_back(identifier("a variable name"));
    if (at_op(".")) {
      next();
      n.targets.push_back(identifier("an attribute name"));
    }
    if (at(Kind::kStatementClose)) {  // {% set x %}body{% endset %}
      next();
      n.body = parse_nodes({"endset"});
      if (stopped_at_ != "endset") unclosed("set", line);
      expect(Kind::kStatementClose, "'%}'");
      return n;
    }
    if (at_op(",")) throw SyntaxError(line, "assigning several variables in one set");
    expect_op("=");
    n.expr = parse_expression();
    expect(Kind::kStatementClose, "'%}'");
    return n;
  }

  // {% macro name(a, b=default, ...) %} body {% endmacro %}
  Node parse_macro(int line) {
    // Headway's macros see the template's top-level variables, not those of a loop or macro
    // around their statement, which Jinja's do: refused rather than rendered differently.
    if (scope_depth_ > 0) {
      throw SyntaxError(line,
                        "a {% macro %} inside a for loop or another macro is not supported; "
                        "define it at the top level");
    }
    Node n = node(Node::Kind::kMacro, line);
    n.text = identifier("a macro name");
    expect_op("(");
    while (!at_op(")")) {
      std::string parameter = identifier("a parameter name");
      if (std::find(n.targets.begin(), n.targets.end(), parameter) != n.targets.end()) {
        throw SyntaxError(line, "macro '" + n.text + "' names parameter '" + parameter + "' twice");
      }
      n.targets.push_back(std::move(parameter));
      if (at_op("=")) {
        next();
        n.defaults.push_back(parse_expression());
      } else {
        if (!n.defaults.empty() && n.defaults.back()) {
          fail("a default value (parameters after one with a default need one too)");
        }
        n.defaults.push_back(nullptr);
      }
      if (!at_op(",")) break;
      next();
    }
    expect_op(")");
    if (n.targets.size() > kMaxMacroParameters) {
      throw SyntaxError(line, "macro '" + n.text + "' has more than " +
                                  std::to_string(kMaxMacroParameters) + " parameters");
    }
    expect(Kind::kStatementClose, "'%}'");
    // A loop around the macro's statement is not a loop around its body.
    const int enclosing_loops = std::exchange(loop_depth_, 0);
    ++scope_depth_;
    n.body = parse_nodes({"endmacro"});
    --scope_depth_;
    loop_depth_ = enclosing_loops;
    if (stopped_at_ != "endmacro") unclosed("macro", line);
    expect(Kind::kStatementClose, "'%}'");
    return n;
  }

  Node parse_loop_control(const std::string& keyword, int line) {
    if (loop_depth_ == 0) {
      throw SyntaxError(line, "'{% " + keyword + " %}' outside a for loop");
    }
    expect(Kind::kStatementClose, "'%}'");
    return node(keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, line);
  }

  [[noreturn]] void unclosed(const std::string& what, int line) const {
    throw SyntaxError(line, "'{% " + what + " %}' is never closed with '{% end" + what + " %}'");
  }

  // ---- expressions (Jinja's precedence, loosest first) ----

  ExprPtr make(Expr::Kind kind, int line, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right) {
    auto e = make(Expr::Kind::kBinary, left->line, std::move(op));
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_expression() {
    const NestingGuard guard(*this);
    ExprPtr value = parse_or();
    while (at_name("if")) {
      const int line = next().line;
      auto e = make(Expr::Kind::kCondition, line);
      e->args.push_back(std::move(value));
      e->args.push_back(parse_or());
      if (at_name("else")) {
        next();
        e->args.push_back(parse_expression());
      } else {
        e->args.push_back(nullptr);
      }
      value = std::move(e);
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      link();
      next();
      left = binary("or", std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      link();
      next();
      left = binary("and", std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    const NestingGuard guard(*this);
    if (at_name("not")) {
      const int line = next().line;
      auto e = make(Expr::Kind::kUnary, line, "not");
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  // The comparison operator at the current token ("==", "in", "not in", ...), consumed; empty
  // when there is none.
  std::string take_comparison() {
    if (at(Kind::kOperator) && is_comparison(peek().text)) return next().text;
    if (at_name("in")) {
      next();
      return "in";
    }
    if (at_name("not") && peek(1).kind == Kind::kName && peek(1).text == "in") {
      next();
      next();
      return "not in";
    }
    return {};
  }
  static bool is_comparison(const std::string& op) {
    return op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_add();
    std::string op = take_comparison();
    if (op.empty()) return left;
    left = binary(op, std::move(left), parse_add());
    // a < b < c is a chain in Jinja; templates do not use it, so refuse it rather than misread it.
    if (!take_comparison().empty()) {
      throw SyntaxError(left->line, "chained comparisons (a < b < c) are not supported");
    }
    return left;
  }

  ExprPtr parse_add() {
    ExprPtr left = parse_concat();
    while (at_op("+") || at_op("-")) {
      link();
      std::string op = next().text;
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_multiply();
    while (at_op("~")) {
      link();
      next();
      left = binary("~", std::move(left), parse_multiply());
    }
    return left;
  }

  ExprPtr parse_multiply() {
    ExprPtr left = parse_power();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      link();
      std::string op = next().text;
      left = binary(op, std::move(left), parse_power());
    }
    return left;
  }

  ExprPtr parse_power() {
    ExprPtr left = parse_unary(true);
    if (at_op("**")) throw SyntaxError(peek().line, "the ** operator is not supported");
    return left;
  }

  ExprPtr parse_unary(bool with_filters) {
    const NestingGuard guard(*this);
    ExprPtr value;
    if (at_op("-") || at_op("+")) {
      const Token& op = next();
      value = make(Expr::Kind::kUnary, op.line, op.text);
      value->args.push_back(parse_unary(false));
    } else {
      value = parse_postfix(parse_primary());
    }
    return with_filters ? parse_filters(std::move(value)) : std::move(value);
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Kind::kString: {
        auto e = make(Expr::Kind::kLiteral, t.line);
        std::string text = next().text;
        // Adjacent string literals concatenate, as in Python.
        while (at(Kind::kString)) text += next().text;
        e->literal = Value::string(std::move(text));
        return e;
      }
      case Kind::kInteger: {
        auto e = make(Expr::Kind::kLiteral, t.line);
        int64_t value = 0;
        const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), value);
        if (r.ec != std::errc()) throw SyntaxError(t.line, "integer " + t.text + " is too large");
        e->literal = Value::integer(value);
        next();
        return e;
      }
      case Kind::kFloat: {
        auto e = make(Expr::Kind::kLiteral, t.line);
        double value = 0.0;
        const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), value);
        if (r.ec != std::errc()) throw SyntaxError(t.line, "number " + t.text + " is out of range");
        e->literal = Value::floating(value);
        next();
        return e;
      }
      case Kind::kName: {
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          auto e = make(Expr::Kind::kLiteral, t.line);
          e->literal = Value::boolean(t.text == "true" || t.text == "True");
          next();
          return e;
        }
        if (t.text == "none" || t.text == "None") {
          auto e = make(Expr::Kind::kLiteral, t.line);
          e->literal = Value::none();
          next();
          return e;
        }
        if (kKeywords.contains(t.text)) fail("an expression");
        next();
        if (at_op("(")) {
          // The template's own macros come first, as its names shadow Jinja's globals. Another
          // name fails when called, as an undefined one does in Jinja.
          const bool macro = macro_names_.contains(t.text);
          auto e = make(macro ? Expr::Kind::kMacroCall : Expr::Kind::kCall, t.line, t.text);
          parse_arguments(*e);
          return e;
        }
        return make(Expr::Kind::kName, t.line, t.text);
      }
      case Kind::kOperator:
        if (t.text == "(") {
          next();
          ExprPtr first = parse_expression();
          if (at_op(",")) {  // a tuple: a list that prints as a tuple
            auto list = make(Expr::Kind::kList, t.line, "tuple");
            list->args.push_back(std::move(first));
            while (at_op(",")) {
              next();
              if (at_op(")")) break;
              list->args.push_back(parse_expression());
            }
            first = std::move(list);
          }
          expect_op(")");
          return first;
        }
        if (t.text == "[") {
          next();
          auto list = make(Expr::Kind::kList, t.line);
          while (!at_op("]")) {
            list->args.push_back(parse_expression());
            if (!at_op(",")) break;
            next();
          }
          expect_op("]");
          return list;
        }
        if (t.text == "{") {
          next();
          auto dict = make(Expr::Kind::kDict, t.line);
          while (!at_op("}")) {
            dict->args.push_back(parse_expression());
            expect_op(":");
            dict->args.push_back(parse_expression());
            if (!at_op(",")) break;
            next();
          }
          expect_op("}");
          return dict;
        }
        [[fallthrough]];
      default:
        fail("an expression");
    }
  }

  // Attribute access, subscripts, slices and method calls.
  ExprPtr parse_postfix(ExprPtr value) {
    for (;;) {
      if (at_op(".") || at_op("[")) link();
      if (at_op(".")) {
        next();
        const Token& name = peek();
        if (name.kind != Kind::kName) fail("an attribute name");
        next();
        if (at_op("(")) {
          // An unknown method fails when called, as Jinja looks methods up then: Kimi K2's
          // template calls list.append() only for tool calls.
          auto call = make(Expr::Kind::kMethod, name.line, name.text);
          call->args.push_back(std::move(value));
          parse_arguments(*call);
          value = std::move(call);
        } else {
          auto attr = make(Expr::Kind::kAttribute, name.line, name.text);
          attr->args.push_back(std::move(value));
          value = std::move(attr);
        }
      } else if (at_op("[")) {
        const int line = next().line;
        value = parse_subscript(std::move(value), line);
      } else if (at_op("(")) {
        throw SyntaxError(peek().line, "calling this value is not supported");
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    int part = 0;
    bool slice = false;
    for (;;) {
      if (at_op(":")) {
        next();
        slice = true;
        if (++part > 2) fail("']'");
        continue;
      }
      if (at_op("]")) break;
      if (parts[part]) fail("':' or ']'");
      parts[part] = parse_expression();
    }
    next();
    if (!slice) {
      if (!parts[0]) throw SyntaxError(line, "empty subscript []");
      auto item = make(Expr::Kind::kItem, line);
      item->args.push_back(std::move(target));
      item->args.push_back(std::move(parts[0]));
      return item;
    }
    auto e = make(Expr::Kind::kSlice, line);
    e->args.push_back(std::move(target));
    for (ExprPtr& p : parts) e->args.push_back(std::move(p));
    return e;
  }

  // "(" positional, ..., name=value, ... ")" into e.args (after any target) and e.kwargs.
  void parse_arguments(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (at(Kind::kName) && peek(1).kind == Kind::kOperator && peek(1).text == "=") {
        std::string name = next().text;
        next();
        e.kwargs.emplace_back(std::move(name), parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("a keyword argument (positional ones come first)");
        e.args.push_back(parse_expression());
      }
      if (!at_op(",")) break;
      next();
    }
    expect_op(")");
  }

  // Filters (x | f(args)) and tests (x is [not] t(args)), which bind tighter than arithmetic.
  ExprPtr parse_filters(ExprPtr value) {
    for (;;) {
      if (at_op("|") || at_name("is")) link();
      if (at_op("|")) {
        next();
        const Token& name = peek();
        if (name.kind != Kind::kName) fail("a filter name");
        next();
        auto f = make(Expr::Kind::kFilter, name.line, name.text);
        f->args.push_back(std::move(value));
        if (at_op("(")) parse_arguments(*f);
        value = parse_postfix(std::move(f));
      } else if (at_name("is")) {
        next();
        bool negated = false;
        if (at_name("not")) {
          next();
          negated = true;
        }
        const Token& name = peek();
        if (name.kind != Kind::kName) fail("a test name");
        next();
        auto t = make(Expr::Kind::kTest, name.line, name.text);
        t->negated = negated;
        t->args.push_back(std::move(value));
        if (at_op("(")) {
          parse_arguments(*t);
        } else if (at(Kind::kString) || at(Kind::kInteger) || at(Kind::kFloat) ||
                   (at(Kind::kName) && !kKeywords.contains(peek().text))) {
          t->args.push_back(parse_postfix(parse_primary()));  // "is divisibleby 3"
        }
        value = std::move(t);
      } else {
        return value;
      }
    }
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  std::string stopped_at_;
  std::set<std::string, std::less<>> macro_names_;
  int loop_depth_ = 0;   // for loops around the statement being parsed, within its macro
  int scope_depth_ = 0;  // for loops and macros around it
  int nesting_ = 0;      // statements and expressions being parsed inside one another
  int chain_links_ = 0;  // of the node being parsed (link())
};

// What Jinja2 would refuse when it compiles the template, and what it has and Headway lacks, is
// refused at load; other unknown names fail only where Jinja2 fails them:
// - a filter or test Jinja2 does not know is refused unless it is in an if statement (its tests
//   and bodies) or a conditional expression, where Jinja2 defers the error to when it runs
//   (DeepSeek V3.2's template applies one to tool arguments only when they are a string). A for
//   loop's body and else, a macro's body, a block set, a filter block and {% generation %} are
//   scopes of their own there, conditional no longer;
// - methods and global functions are looked up when called, so only those that Python or Jinja2
//   has and Headway lacks are refused at load.
void check_names(const Expr& e, bool conditional) {
  const auto refuse = [&](const std::string& what) {
    throw SyntaxError(
        e.line, what + " '" + e.name + "' is not supported by Headway's chat template interpreter");
  };
  if (e.kind == Expr::Kind::kFilter && !is_filter(e.name)) {
    if (lacks_jinja_filter(e.name)) refuse("filter");
    if (!conditional) throw SyntaxError(e.line, "unknown filter '" + e.name + "'");
  }
  if (e.kind == Expr::Kind::kTest && !is_test(e.name)) {
    if (lacks_jinja_test(e.name)) refuse("test");
    if (!conditional) throw SyntaxError(e.line, "unknown test '" + e.name + "'");
  }
  if (e.kind == Expr::Kind::kMethod && !is_method(e.name) && lacks_python_method(e.name)) {
    refuse("method");
  }
  if (e.kind == Expr::Kind::kCall && !is_function(e.name) && lacks_jinja_global(e.name)) {
    refuse("function");
  }
  const bool inner = conditional || e.kind == Expr::Kind::kCondition;
  for (const ExprPtr& a : e.args) {
    if (a) check_names(*a, inner);
  }
  for (const auto& [name, value] : e.kwargs) check_names(*value, inner);
}

void check_names(const std::vector<Node>& nodes, bool conditional) {
  for (const Node& n : nodes) {
    const bool own_scope = n.kind == Node::Kind::kFor || n.kind == Node::Kind::kMacro ||
                           n.kind == Node::Kind::kGeneration ||
                           n.kind == Node::Kind::kFilterBlock || n.kind == Node::Kind::kSet;
    if (n.expr) check_names(*n.expr, n.kind == Node::Kind::kFilterBlock ? false : conditional);
    if (n.condition) check_names(*n.condition, false);            // a for loop's filter
    for (const ExprPtr& c : n.conditions) check_names(*c, true);  // an if's tests
    for (const ExprPtr& d : n.defaults) {
      if (d) check_names(*d, false);
    }
    for (const std::vector<Node>& b : n.bodies) check_names(b, true);  // an if's branches
    check_names(n.body, own_scope ? false : conditional);
    check_names(n.else_body, n.kind == Node::Kind::kIf);
  }
}

}  // namespace

std::vector<Node> parse(const std::vector<Token>& tokens) {
  std::vector<Node> nodes = Parser(tokens).parse_template();
  check_names(nodes, /*conditional=*/false);
  return nodes;
}

}  // namespace headway::serving::jinja
