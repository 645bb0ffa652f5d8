// The values a chat template computes with, following Python/Jinja semantics where templates
// depend on them: truthiness, ==, printing (str()), and undefined (a missing variable, key or
// attribute prints as nothing and is falsy, but arithmetic on it is an error).
//
// Ownership: lists and dicts are shared (as Python objects are), so a namespace() assigned to a
// variable and modified through `{% set ns.x = ... %}` is seen by every reference to it.
// Threading: a Value is used by the one thread that renders a template.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace headway::serving::jinja {

// A rendered prompt is bounded by the model's context; this bound on the prompt and on any text a
// template builds only stops a runaway template.
constexpr size_t kMaxTextBytes = 64u << 20;
// Refuses text of `bytes` past kMaxTextBytes: std::runtime_error "<what> exceeds 64 MiB", which
// the evaluator reports with the statement's line.
void check_text_size(size_t bytes, const std::string& what);

// How deep the walks over values (repr, equal, tojson, the comparisons of sort) follow lists
// and dicts into each other. A namespace can be made to hold itself (`{% set ns.a = ns %}`), and
// a loop can nest a value 200,000 deep: following either overflowed the stack (helper-129's
// fuzzing, helper-135); no data a template is given nests a tenth as deep.
constexpr int kMaxValueDepth = 500;

// Counts one level of such a walk on this thread while it lives; constructing the one past
// kMaxValueDepth throws std::runtime_error "a value nested deeper than 500 levels ...".
class ValueDepth {
 public:
  ValueDepth();
  ~ValueDepth() { --depth_; }
  ValueDepth(const ValueDepth&) = delete;
  ValueDepth& operator=(const ValueDepth&) = delete;

 private:
  static thread_local int depth_;
};

class Value;
using List = std::vector<Value>;
// A dict's entries in insertion order, as Python's dict. Keys are strings, numbers, booleans or
// none (Seed-OSS's template maps token budgets: {0: 0, 512: 128, ...}).
using Dict = std::vector<std::pair<Value, Value>>;
// Values by name: a template's global variables, or a dict whose keys are all strings.
using Names = std::vector<std::pair<std::string, Value>>;

// A failure while rendering; `line` is the template line of the expression or statement.
struct RenderError : std::runtime_error {
  RenderError(int line, const std::string& message) : std::runtime_error(message), line(line) {}
  int line;
};

// raise_exception("...") called by the template: the template refuses the conversation.
struct TemplateException : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How tojson writes a value: Python's json.dumps with the arguments Hugging Face's tojson passes
// on (its default ensure_ascii is False, where json.dumps's is True).
struct JsonFormat {
  std::optional<int> indent;          // none: one line; n: a newline and n spaces per level
  std::string item_separator = ", ";  // json.dumps: ", " without an indent, "," with one
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;  // non-ASCII characters as \uXXXX (surrogate pairs above U+FFFF)
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict };

  Value() = default;  // undefined
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  // One assignment for copies and moves: the value replaced is freed as the destructor frees.
  Value& operator=(Value other) noexcept;
  // Frees a list or dict whose last reference this is without recursing into its items (a value
  // nested 200,000 deep would exhaust the stack): see jinja_value.cpp.
  ~Value();

  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double f);
  static Value string(std::string s);
  static Value list(List items = {});
  // A list that prints as Python's tuple ("(1, 'a')"): a (a, b) literal, an items() pair.
  static Value tuple(List items);
  static Value dict(Names items = {}, bool is_namespace = false);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kDict && namespace_; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }
  double as_number() const { return kind_ == Kind::kInt ? static_cast<double>(int_) : float_; }
  const std::string& as_string() const { return *string_; }
  List& as_list() const { return *list_; }
  Dict& as_dict() const { return *dict_; }

  // Python's truth value: undefined, none, false, 0, "" and empty containers are false.
  bool truthy() const;
  // Python's str(): None, True, 1.5, "text", ['a', 1], {'k': 'v'}; undefined is "".
  std::string str() const;
  // Python's repr() (strings quoted), used inside lists and dicts; repr_into appends it.
  std::string repr() const;
  void repr_into(std::string& out) const;
  // JSON text as json.dumps writes it with `format`. Undefined is an error.
  std::string to_json(const JsonFormat& format) const;

  // Dict lookup (by a string key, or a key of any kind); undefined when absent or not a dict.
  Value get(const std::string& key) const;
  Value get(const Value& key) const;
  // Sets a dict entry (replacing an existing one). A key that is not a string, number, boolean or
  // none throws std::runtime_error (Python's "unhashable type").
  void set(const std::string& key, Value value) const;
  void set(const Value& key, Value value) const;

  // A name for error messages ("string", "list", "undefined", ...).
  const char* type_name() const;

 private:
  void swap(Value& other) noexcept;

  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool namespace_ = false;
  bool tuple_ = false;
  int64_t int_ = 0;
  double float_ = 0.0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
};

// Python ==, with 1 == 1.0 and element-wise containers.
bool equal(const Value& a, const Value& b);

}  // namespace headway::serving::jinja
