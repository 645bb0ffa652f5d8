#include "jinja_evaluator.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "jinja_builtins.h"

namespace headway::serving::jinja {
namespace {

// Macros may call themselves (a template rendering a nested JSON schema); this bounds the nesting
// well above any schema's depth and well below what the C++ stack holds.
constexpr int kMaxMacroDepth = 100;
// Loop iterations of one render, all loops together: a chat template iterates messages, tools and
// their fields, far fewer; two nested range(1000000) loops ran for ever on every request.
constexpr uint64_t kMaxLoopIterations = 1'000'000;
// Expressions being evaluated inside one another (EvalDepth): far past any template's, within the
// stack of a server's worker thread (8 MiB) also in the sanitizer build, whose eval() and binary()
// take 8 KB a level (gdb), where an optimised build takes some 600 bytes.
constexpr int kMaxEvalDepth = 800;
// Items of a list built with +: as range()'s bound.
constexpr size_t kMaxListItems = 1'000'000;

class Evaluator {
 public:
  explicit Evaluator(const Names& globals) {
    scopes_.emplace_back();
    for (const auto& [name, value] : globals) scopes_.front()[name] = value;
  }
  // A namespace may hold itself (`{% set ns.a = ns %}`, or a list holding it): the shared
  // pointers of such a cycle would never be freed. Emptying every namespace of the render breaks
  // them; nothing of the render outlives it but its text.
  ~Evaluator() {
    for (const Value& ns : namespaces_) ns.as_dict().clear();
  }
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  std::string run(const std::vector<Node>& nodes) {
    execute(nodes);
    return std::move(out_);
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  [[noreturn]] static void fail(int line, const std::string& message) {
    throw RenderError(line, message);
  }

  void emit(int line, std::string_view text) {
    if (out_.size() + text.size() > kMaxTextBytes) {
      fail(line, "the rendered prompt exceeds 64 MiB");
    }
    out_ += text;
  }

  // A name in the scopes of the running macro (or of the template outside macros), then in the
  // template's top scope: a macro sees the template's globals and top-level variables as they are
  // when it is called, as Jinja's do, but not the loop variables around the call.
  Value lookup(const std::string& name) const {
    for (size_t i = scopes_.size(); i-- > frame_base_;) {
      const auto found = scopes_[i].find(name);
      if (found != scopes_[i].end()) return found->second;
    }
    if (frame_base_ > 0) {
      const auto found = scopes_.front().find(name);
      if (found != scopes_.front().end()) return found->second;
    }
    return {};
  }

  // What `body` writes, rendered apart from the output (a macro's value, a block set's).
  std::string capture(const std::vector<Node>& body) {
    std::string outer = std::move(out_);
    out_.clear();
    try {
      execute(body);
    } catch (...) {
      out_ = std::move(outer);
      throw;
    }
    std::string captured = std::move(out_);
    out_ = std::move(outer);
    return captured;
  }

  // ---- statements ----

  // Runs `nodes` until one of them breaks or continues the loop around them.
  void execute(const std::vector<Node>& nodes) {
    for (const Node& node : nodes) {
      execute(node);
      if (flow_ != Flow::kNext) return;
    }
  }

  // One statement, its failures named by its line: a value's own limits (a value nested too deep,
  // text past 64 MiB) and running out of memory refuse the conversation instead of failing the
  // server (std::bad_alloc was an HTTP 500, helper-129's fuzzing).
  void execute(const Node& node) {
    try {
      execute_statement(node);
    } catch (const RenderError&) {
      throw;
    } catch (const TemplateException&) {
      throw;
    } catch (const std::bad_alloc&) {
      fail(node.line, "the template ran out of memory");
    } catch (const std::runtime_error& error) {
      fail(node.line, error.what());
    }
  }

  void execute_statement(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kText:
        emit(node.line, node.text);
        return;
      case Node::Kind::kOutput:
        emit(node.line, eval(*node.expr).str());
        return;
      case Node::Kind::kIf:
        for (size_t i = 0; i < node.conditions.size(); ++i) {
          if (eval(*node.conditions[i]).truthy()) {
            execute(node.bodies[i]);
            return;
          }
        }
        execute(node.else_body);
        return;
      case Node::Kind::kFor:
        execute_for(node);
        return;
      case Node::Kind::kSet: {
        Value value = node.expr ? eval(*node.expr) : Value::string(capture(node.body));
        if (flow_ != Flow::kNext) return;  // a break in the block: Jinja assigns nothing
        if (node.targets.size() == 2) {
          const Value target = lookup(node.targets[0]);
          if (!target.is_namespace()) {
            fail(node.line, "cannot set an attribute of '" + node.targets[0] +
                                "', which is not a namespace()");
          }
          target.set(node.targets[1], std::move(value));
        } else {
          scopes_.back()[node.targets[0]] = std::move(value);
        }
        return;
      }
      case Node::Kind::kMacro:
        macros_[node.text] = &node;
        return;
      case Node::Kind::kBreak:
        flow_ = Flow::kBreak;
        return;
      case Node::Kind::kContinue:
        flow_ = Flow::kContinue;
        return;
      case Node::Kind::kGeneration:
        execute(node.body);
        return;
      case Node::Kind::kFilterBlock: {
        const Value text = Value::string(capture(node.body));
        if (flow_ != Flow::kNext) return;  // a break in the block: Jinja writes nothing
        Arguments args;
        for (const ExprPtr& a : node.expr->args) args.push_back(eval(*a));
        KeywordArguments kwargs;
        for (const auto& [name, value] : node.expr->kwargs) kwargs.emplace_back(name, eval(*value));
        try {
          emit(node.line, apply_filter(node.expr->name, text, args, kwargs).str());
        } catch (const RenderError&) {
          throw;
        } catch (const std::runtime_error& error) {
          fail(node.line, error.what());
        }
        return;
      }
    }
  }

  void count_iteration(int line) {
    if (++iterations_ > kMaxLoopIterations) {
      fail(line, "the template's loops ran more than " + std::to_string(kMaxLoopIterations) +
                     " iterations");
    }
  }

  void execute_for(const Node& node) {
    const Value iterable = eval(*node.expr);
    List items;
    try {
      if (iterable.is_none()) throw std::runtime_error("cannot iterate over none");
      items = apply_filter("list", iterable, {}, {}).as_list();
    } catch (const std::runtime_error& e) {
      fail(node.line, std::string("for loop: ") + e.what());
    }
    if (node.condition) {  // {% for x in xs if cond %}: filtered before loop.* is computed
      List kept;
      for (const Value& item : items) {
        count_iteration(node.line);
        scopes_.emplace_back();
        bind_targets(node, item);
        if (eval(*node.condition).truthy()) kept.push_back(item);
        scopes_.pop_back();
      }
      items.swap(kept);
    }
    // Jinja runs the else block unless an iteration reached the end of the body: after no
    // iteration, and also when each one broke or continued.
    bool body_completed = false;
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      count_iteration(node.line);
      scopes_.emplace_back();
      bind_targets(node, items[i]);
      scopes_.back()["loop"] = Value::dict({
          {"index0", Value::integer(i)},
          {"index", Value::integer(i + 1)},
          {"revindex0", Value::integer(n - i - 1)},
          {"revindex", Value::integer(n - i)},
          {"first", Value::boolean(i == 0)},
          {"last", Value::boolean(i == n - 1)},
          {"length", Value::integer(n)},
          {"previtem", i > 0 ? items[i - 1] : Value()},
          {"nextitem", i + 1 < n ? items[i + 1] : Value()},
      });
      try {
        execute(node.body);
      } catch (...) {
        scopes_.pop_back();
        throw;
      }
      scopes_.pop_back();
      const Flow flow = std::exchange(flow_, Flow::kNext);
      if (flow == Flow::kBreak) break;
      body_completed = body_completed || flow == Flow::kNext;
    }
    if (!body_completed) execute(node.else_body);
  }

  void bind_targets(const Node& node, const Value& item) {
    if (node.targets.size() == 1) {
      scopes_.back()[node.targets[0]] = item;
      return;
    }
    if (!item.is_list() || item.as_list().size() != node.targets.size()) {
      fail(node.line, "for loop: cannot unpack a " + std::string(item.type_name()) + " into " +
                          std::to_string(node.targets.size()) + " variables");
    }
    for (size_t i = 0; i < node.targets.size(); ++i) {
      scopes_.back()[node.targets[i]] = item.as_list()[i];
    }
  }

  // ---- expressions ----

  // Counts the expressions being evaluated inside one another, across macro calls: the parser
  // bounds one statement's depth, but a macro calling itself multiplies it (7 levels of a
  // 1,990-link chain overflowed the stack: helper-131).
  struct EvalDepth {
    explicit EvalDepth(Evaluator& evaluator, int line) : depth(evaluator.eval_depth_) {
      if (++depth > kMaxEvalDepth) {
        --depth;
        fail(line, "expressions evaluated more than " + std::to_string(kMaxEvalDepth) +
                       " deep (macros calling themselves?)");
      }
    }
    ~EvalDepth() { --depth; }
    EvalDepth(const EvalDepth&) = delete;
    EvalDepth& operator=(const EvalDepth&) = delete;
    int& depth;
  };

  Value eval(const Expr& e) {
    const EvalDepth level(*this, e.line);
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return lookup(e.name);
      case Expr::Kind::kList: {
        List items;
        for (const ExprPtr& a : e.args) items.push_back(eval(*a));
        return e.name == "tuple" ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      case Expr::Kind::kDict: {
        Value dict = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i]);
          try {
            dict.set(key, eval(*e.args[i + 1]));
          } catch (const RenderError&) {
            throw;
          } catch (const std::runtime_error& error) {
            fail(e.line, error.what());
          }
        }
        return dict;
      }
      case Expr::Kind::kAttribute: {
        const Value target = eval(*e.args[0]);
        if (target.is_undefined()) {
          fail(e.line, "'" + describe(*e.args[0]) + "' is undefined (reading ." + e.name + ")");
        }
        return target.get(e.name);
      }
      case Expr::Kind::kItem:
        return item(e, eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::kSlice:
        return slice(e);
      case Expr::Kind::kUnary:
        return unary(e);
      case Expr::Kind::kBinary:
        return binary(e);
      case Expr::Kind::kCondition:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value();
      case Expr::Kind::kFilter:
      case Expr::Kind::kTest:
      case Expr::Kind::kMethod:
      case Expr::Kind::kCall:
        return call(e);
      case Expr::Kind::kMacroCall:
        return call_macro(e);
    }
    return {};
  }

  // A macro's output for the arguments of `e`, as a string. Parameters the call leaves out take
  // their defaults (evaluated after the parameters before them are bound, as Jinja does) or are
  // undefined.
  Value call_macro(const Expr& e) {
    const auto found = macros_.find(e.name);
    if (found == macros_.end()) {
      fail(e.line, "macro '" + e.name + "' is called before its {% macro %} statement has run");
    }
    const Node& macro = *found->second;
    const std::vector<std::string>& parameters = macro.targets;
    if (e.args.size() > parameters.size()) {
      fail(e.line, "macro '" + e.name + "' takes " + std::to_string(parameters.size()) +
                       " argument(s), got " + std::to_string(e.args.size()));
    }
    if (macro_depth_ == kMaxMacroDepth) {
      fail(e.line, "macro calls nest more than " + std::to_string(kMaxMacroDepth) +
                       " deep (a macro that never stops calling itself?)");
    }
    Scope arguments;
    std::vector<bool> bound(parameters.size(), false);
    for (size_t i = 0; i < e.args.size(); ++i) {
      arguments[parameters[i]] = eval(*e.args[i]);
      bound[i] = true;
    }
    for (const auto& [name, value] : e.kwargs) {
      const auto at = std::find(parameters.begin(), parameters.end(), name);
      if (at == parameters.end()) {
        fail(e.line, "macro '" + e.name + "' has no parameter '" + name + "'");
      }
      const auto i = static_cast<size_t>(at - parameters.begin());
      if (bound[i]) fail(e.line, "macro '" + e.name + "' got parameter '" + name + "' twice");
      arguments[name] = eval(*value);
      bound[i] = true;
    }
    const size_t outer_base = std::exchange(frame_base_, scopes_.size());
    const size_t outer_scopes = scopes_.size();
    scopes_.push_back(std::move(arguments));
    ++macro_depth_;
    std::string text;
    try {
      for (size_t i = 0; i < parameters.size(); ++i) {
        if (!bound[i] && macro.defaults[i])
          scopes_.back()[parameters[i]] = eval(*macro.defaults[i]);
      }
      text = capture(macro.body);
    } catch (...) {
      --macro_depth_;
      scopes_.resize(outer_scopes);
      frame_base_ = outer_base;
      throw;
    }
    --macro_depth_;
    scopes_.resize(outer_scopes);
    frame_base_ = outer_base;
    return Value::string(std::move(text));
  }

  // What an expression was, for "'x' is undefined" messages.
  static std::string describe(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kName:
        return e.name;
      case Expr::Kind::kAttribute:
        return describe(*e.args[0]) + "." + e.name;
      case Expr::Kind::kItem:
        return describe(*e.args[0]) + "[" +
               (e.args[1]->kind == Expr::Kind::kLiteral ? e.args[1]->literal.repr() : "...") + "]";
      default:
        return "the value";
    }
  }

  Value item(const Expr& e, const Value& target, const Value& key) {
    if (target.is_undefined()) {
      fail(e.line, "'" + describe(*e.args[0]) + "' is undefined (reading [" + key.repr() + "])");
    }
    if (target.is_dict()) return target.get(key);
    if (target.is_string() && key.kind() == Value::Kind::kInt) {
      // Found where it is: a value per character of a client's 30 MB message took 4 GB.
      const std::string& s = target.as_string();
      const auto n = static_cast<int64_t>(character_count(s));
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return {};
      const size_t at = character_offset(s, static_cast<size_t>(i));
      return Value::string(s.substr(at, character_offset(s, static_cast<size_t>(i) + 1) - at));
    }
    if (target.is_list() && key.kind() == Value::Kind::kInt) {
      // A list is read where it is (elements()): copying it made `messages[i]` in a loop over the
      // messages quadratic (100,000 took 82.7 s in request_parsing_benchmark).
      List scratch;
      const List& all = elements("a subscript", target, scratch);
      int64_t i = key.as_int();
      const auto n = static_cast<int64_t>(all.size());
      if (i < 0) i += n;
      return (i >= 0 && i < n) ? all[static_cast<size_t>(i)] : Value();
    }
    return {};
  }

  Value slice(const Expr& e) {
    const Value target = eval(*e.args[0]);
    int64_t bounds[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int i = 0; i < 3; ++i) {
      if (!e.args[i + 1]) continue;
      const Value v = eval(*e.args[i + 1]);
      if (v.is_none()) continue;
      if (v.kind() != Value::Kind::kInt) fail(e.line, "slice bounds must be integers");
      bounds[i] = v.as_int();
      given[i] = true;
    }
    if (!target.is_list() && !target.is_string()) {
      fail(e.line, "cannot slice a " + std::string(target.type_name()));
    }
    const int64_t step = bounds[2];
    if (step == 1 && target.is_string()) {  // s[a:b], without a value per character
      const std::string& s = target.as_string();
      const auto n = static_cast<int64_t>(character_count(s));
      const auto at = [&](int64_t i, bool present, int64_t fallback) {
        if (!present) return static_cast<size_t>(fallback);
        if (i < 0) i += n;
        return static_cast<size_t>(std::clamp<int64_t>(i, 0, n));
      };
      const size_t start = at(bounds[0], given[0], 0);
      const size_t stop = at(bounds[1], given[1], n);
      if (start >= stop) return Value::string("");
      const size_t from = character_offset(s, start);
      return Value::string(s.substr(from, character_offset(s, stop) - from));
    }
    List scratch;
    const List& all = elements("a slice", target, scratch);
    const auto n = static_cast<int64_t>(all.size());
    if (step == 0) fail(e.line, "slice step cannot be zero");
    // Python's slice.indices().
    const auto clamp = [&](int64_t i, bool present, int64_t fallback) {
      if (!present) return fallback;
      if (i < 0) i += n;
      if (step > 0) return std::clamp<int64_t>(i, 0, n);
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t start = clamp(bounds[0], given[0], step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(bounds[1], given[1], step > 0 ? n : -1);
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      out.push_back(all[static_cast<size_t>(i)]);
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    if (target.is_list()) return Value::list(std::move(out));
    std::string text;
    for (const Value& c : out) text += c.as_string();
    return Value::string(std::move(text));
  }

  Value unary(const Expr& e) {
    Value v = eval(*e.args[0]);
    if (e.name == "not") return Value::boolean(!v.truthy());
    if (!v.is_number()) {
      fail(e.line, "unary " + e.name + " needs a number, got " + std::string(v.type_name()));
    }
    if (e.name == "+") return v;
    if (v.kind() == Value::Kind::kInt && v.as_int() == INT64_MIN) fail(e.line, "integer overflow");
    return v.kind() == Value::Kind::kInt ? Value::integer(-v.as_int())
                                         : Value::floating(-v.as_number());
  }

  // a ~ b, a + b: bounded as string repetition is (doubling a string 40 times took 12.9 GB).
  static std::string joined_text(const std::string& a, const std::string& b) {
    check_text_size(a.size() + b.size(), "a string");
    return a + b;
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and" || op == "or") {  // Python: returns the deciding operand
      Value left = eval(*e.args[0]);
      if (left.truthy() == (op == "or")) return left;
      return eval(*e.args[1]);
    }
    const Value a = eval(*e.args[0]);
    const Value b = eval(*e.args[1]);
    if (op == "~") return Value::string(joined_text(a.str(), b.str()));
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "in" || op == "not in") {
      if (b.is_undefined()) return Value::boolean(op == "not in");  // Jinja: nothing is in it
      if (!b.is_string() && !b.is_list() && !b.is_dict()) {
        fail(e.line,
             "'in' needs a string, list or dict on its right, got " + std::string(b.type_name()));
      }
      if (b.is_string() && !a.is_string()) fail(e.line, "'in <string>' needs a string on its left");
      return Value::boolean(apply_test("in", a, {b}) == (op == "in"));
    }
    if (a.is_undefined() || b.is_undefined()) {
      fail(e.line,
           "'" + describe(*e.args[a.is_undefined() ? 0 : 1]) + "' is undefined (in " + op + ")");
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=") return compare(e, a, b);
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        return Value::string(joined_text(a.as_string(), b.as_string()));
      }
      if (a.is_list() && b.is_list()) {
        if (a.as_list().size() + b.as_list().size() > kMaxListItems) {
          fail(e.line, "a list of more than " + std::to_string(kMaxListItems) + " items");
        }
        List joined = a.as_list();
        joined.insert(joined.end(), b.as_list().begin(), b.as_list().end());
        return Value::list(std::move(joined));
      }
    }
    if (op == "*" && a.is_string() && b.kind() == Value::Kind::kInt) {
      // An empty string never reaches the bound below: '' * 10**11 looped for ever (helper-131).
      if (a.as_string().empty() || b.as_int() <= 0) return Value::string("");
      // The size checked before any copy: 'x' * 10**10 appended 950 MB over 32 s before the
      // bound was hit (helper-151's fuzzer). The quotient cannot overflow as size * n could.
      const size_t n = static_cast<size_t>(b.as_int());
      if (n > kMaxTextBytes / a.as_string().size()) {
        fail(e.line, "string repetition exceeds 64 MiB");
      }
      std::string out;
      out.reserve(a.as_string().size() * n);
      for (size_t i = 0; i < n; ++i) out += a.as_string();
      return Value::string(std::move(out));
    }
    if (!a.is_number() || !b.is_number()) {
      fail(e.line,
           "unsupported operand types for " + op + ": " + a.type_name() + " and " + b.type_name());
    }
    const bool ints = a.kind() == Value::Kind::kInt && b.kind() == Value::Kind::kInt;
    if ((op == "/" || op == "//" || op == "%") && b.as_number() == 0) {
      fail(e.line, "division by zero");
    }
    if (op == "/") return Value::floating(a.as_number() / b.as_number());
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      int64_t r = 0;
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                            : op == "*" ? __builtin_mul_overflow(x, y, &r)
                                        : (x == INT64_MIN && y == -1);
      if (overflow) fail(e.line, "integer overflow in " + op);
      if (op == "+" || op == "-" || op == "*") return Value::integer(r);
      // Python floors integer division and takes the divisor's sign for the remainder.
      const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);
      if (op == "//") return Value::integer(q);
      if (op == "%") return Value::integer(x - q * y);
    }
    const double x = a.as_number(), y = b.as_number();
    if (op == "+") return Value::floating(x + y);
    if (op == "-") return Value::floating(x - y);
    if (op == "*") return Value::floating(x * y);
    if (op == "//") return Value::floating(std::floor(x / y));
    if (op == "%") return Value::floating(x - std::floor(x / y) * y);
    fail(e.line, "unknown operator " + op);
  }

  Value compare(const Expr& e, const Value& a, const Value& b) {
    int order = 0;
    if (a.is_number() && b.is_number()) {
      order = a.as_number() < b.as_number() ? -1 : (a.as_number() > b.as_number() ? 1 : 0);
    } else if (a.is_string() && b.is_string()) {
      order = a.as_string().compare(b.as_string());
    } else {
      fail(e.line, "cannot compare a " + std::string(a.type_name()) + " with a " + b.type_name());
    }
    const std::string& op = e.name;
    return Value::boolean(op == "<"    ? order < 0
                          : op == "<=" ? order <= 0
                          : op == ">"  ? order > 0
                                       : order >= 0);
  }

  Value call(const Expr& e) {
    const bool has_target = e.kind != Expr::Kind::kCall;
    const Value target = has_target ? eval(*e.args[0]) : Value();
    Arguments args;
    for (size_t i = has_target ? 1 : 0; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
    KeywordArguments kwargs;
    for (const auto& [name, value] : e.kwargs) kwargs.emplace_back(name, eval(*value));
    if (e.kind == Expr::Kind::kCall && e.name == "raise_exception") {
      throw TemplateException(args.empty() ? std::string("raise_exception() was called")
                                           : args[0].str());
    }
    try {
      switch (e.kind) {
        case Expr::Kind::kFilter:
          return apply_filter(e.name, target, args, kwargs);
        case Expr::Kind::kTest:
          // Global functions and macros are defined names (Llama 3.2's template asks whether
          // strftime_now is), though they are not values here.
          if ((e.name == "defined" || e.name == "undefined") && target.is_undefined() &&
              e.args[0]->kind == Expr::Kind::kName &&
              (is_function(e.args[0]->name) || macros_.contains(e.args[0]->name))) {
            return Value::boolean((e.name == "defined") != e.negated);
          }
          return Value::boolean(apply_test(e.name, target, args) != e.negated);
        case Expr::Kind::kMethod:
          if (target.is_undefined()) {
            fail(e.line, "'" + describe(*e.args[0]) + "' is undefined (calling ." + e.name + ")");
          }
          return call_method(e.name, target, args, kwargs);
        default: {
          Value made = call_function(e.name, args, kwargs);
          if (made.is_namespace()) namespaces_.push_back(made);
          return made;
        }
      }
    } catch (const RenderError&) {
      throw;
    } catch (const std::runtime_error& error) {
      fail(e.line, error.what());
    }
  }

  enum class Flow { kNext, kBreak, kContinue };

  std::vector<Scope> scopes_;
  size_t frame_base_ = 0;  // the first scope of the running macro; 0 outside macros
  std::unordered_map<std::string, const Node*> macros_;  // defined so far; nodes of the tree
  int macro_depth_ = 0;
  int eval_depth_ = 0;             // EvalDepth
  uint64_t iterations_ = 0;        // of every loop so far (count_iteration)
  std::vector<Value> namespaces_;  // made by this render, emptied at its end
  Flow flow_ = Flow::kNext;        // set by break/continue until their loop takes it
  std::string out_;
};

}  // namespace

std::string render(const std::vector<Node>& nodes, const Names& globals) {
  return Evaluator(globals).run(nodes);
}

}  // namespace headway::serving::jinja
