#include "jinja_value.h"

#include <headway/core/utf8.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

namespace headway::serving::jinja {
namespace {

// Python's repr() of a float, which str(), json.dumps and so Jinja's output and tojson all use:
// the shortest digits that read back as the same double, written positionally when the decimal
// exponent is in [-4, 16) (100000.0, 0.0001) and as 1e+16 or 1.5e-05 otherwise.
std::string float_text(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), f, std::chars_format::scientific);
  const std::string_view scientific(buffer, static_cast<size_t>(result.ptr - buffer));
  // "-d.ddde+XX" -> sign, digits "dddd", exponent XX.
  const size_t e = scientific.find('e');
  std::string_view mantissa = scientific.substr(0, e);
  std::string out;
  if (mantissa.front() == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  std::string_view exponent_text = scientific.substr(e + 1);
  if (exponent_text.front() == '+') exponent_text.remove_prefix(1);
  std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      const auto whole = static_cast<size_t>(exponent) + 1;
      if (digits.size() < whole) digits.append(whole - digits.size(), '0');
      out += digits.substr(0, whole);
      out += '.';
      out += digits.size() > whole ? digits.substr(whole) : "0";
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += exponent < 0 ? "e-" : "e+";
  const std::string magnitude = std::to_string(std::abs(exponent));
  if (magnitude.size() < 2) out += '0';
  return out + magnitude;
}

void append_u_escape(uint32_t unit, std::string& out) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(unit));
  out += buffer;
}

// A non-ASCII character (or an invalid byte, as U+FFFD) at the start of `bytes` as json.dumps's
// ensure_ascii writes it; returns the bytes it used.
size_t append_ascii_escape(std::string_view bytes, std::string& out) {
  const size_t n = core::utf8::complete_length(bytes);
  if (n == 0) {
    append_u_escape(0xFFFD, out);
    return 1;
  }
  uint32_t code = core::utf8::first_code_point(bytes);
  if (code >= 0x10000) {
    code -= 0x10000;
    append_u_escape(0xD800 + (code >> 10), out);
    append_u_escape(0xDC00 + (code & 0x3FF), out);
  } else {
    append_u_escape(code, out);
  }
  return n;
}

std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (ensure_ascii && static_cast<unsigned char>(c) >= 0x7F) {
      if (c == 0x7F) {
        append_u_escape(0x7F, out);
      } else {
        i += append_ascii_escape(std::string_view(s).substr(i), out) - 1;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          append_u_escape(static_cast<unsigned char>(c), out);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string python_quote(const std::string& s) {
  // Python picks single quotes unless the text contains one and no double quote.
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + q;
}

// A dict key as json.dumps writes it: JSON keys are strings, so 1 is "1", True is "true" and
// None is "null".
std::string json_key(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString:
      return key.as_string();
    case Value::Kind::kBool:
      return key.as_bool() ? "true" : "false";
    case Value::Kind::kNone:
      return "null";
    default:
      return key.repr();
  }
}

void json_into(const Value& v, const JsonFormat& format, int depth, std::string& out) {
  const ValueDepth level;
  check_text_size(out.size(), "tojson: the text");
  const auto newline = [&](int level) {
    if (!format.indent) return;
    out += '\n';
    out.append(static_cast<size_t>(std::max(*format.indent, 0)) * static_cast<size_t>(level), ' ');
    check_text_size(out.size(), "tojson: the text");
  };
  const std::string& item_separator = format.item_separator;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      throw std::runtime_error("tojson: the value is undefined");
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat:
      // json.dumps writes the values JSON has no number for as JavaScript names them.
      if (std::isnan(v.as_number())) {
        out += "NaN";
      } else if (std::isinf(v.as_number())) {
        out += v.as_number() > 0 ? "Infinity" : "-Infinity";
      } else {
        out += float_text(v.as_number());
      }
      return;
    case Value::Kind::kString:
      out += json_string(v.as_string(), format.ensure_ascii);
      return;
    case Value::Kind::kList: {
      if (v.as_list().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const Value& item : v.as_list()) {
        if (!first) out += item_separator;
        first = false;
        newline(depth + 1);
        json_into(item, format, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.as_dict().empty()) {
        out += "{}";
        return;
      }
      out += '{';
      std::vector<const std::pair<Value, Value>*> entries;
      entries.reserve(v.as_dict().size());
      for (const auto& entry : v.as_dict()) entries.push_back(&entry);
      if (format.sort_keys) {
        // Numbers by value; other keys by their text, where UTF-8 byte order is code point order,
        // Python's order of str keys.
        std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
          if (a->first.is_number() && b->first.is_number()) {
            return a->first.as_number() < b->first.as_number();
          }
          return json_key(a->first) < json_key(b->first);
        });
      }
      bool first = true;
      for (const auto* entry : entries) {
        if (!first) out += item_separator;
        first = false;
        newline(depth + 1);
        out += json_string(json_key(entry->first), format.ensure_ascii);
        out += format.key_separator;
        json_into(entry->second, format, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
  }
}

// Lists and dicts whose last reference went while another container was being freed. Freeing a
// list frees its items, and an item's own list frees its items in turn, one call deeper a level:
// a template that nests a value 200,000 deep in a loop ({% set ns.x = [ns.x] %}) overflowed the
// stack when it was freed. So the outermost destructor that frees a container sets `parking` to
// a list of its own, every container whose last reference goes meanwhile is parked there instead
// of freed, and the outermost one frees the parked ones one at a time: the stack stays two
// destructors deep whatever the nesting. A raw pointer per thread (a value belongs to the thread
// that renders with it): nothing to destroy at thread exit.
struct Parked {
  std::vector<std::shared_ptr<List>> lists;
  std::vector<std::shared_ptr<Dict>> dicts;
};
thread_local Parked* parking = nullptr;

}  // namespace

thread_local int ValueDepth::depth_ = 0;

ValueDepth::ValueDepth() {
  if (++depth_ > kMaxValueDepth) {
    --depth_;
    throw std::runtime_error("a value nested deeper than " + std::to_string(kMaxValueDepth) +
                             " levels (a namespace or list that holds itself?)");
  }
}

Value::~Value() {
  const bool last_list = list_ != nullptr && list_.use_count() == 1;
  const bool last_dict = dict_ != nullptr && dict_.use_count() == 1;
  if (!last_list && !last_dict) return;  // scalars, strings, shared containers: nothing deep
  if (parking != nullptr) {
    try {
      if (last_list) parking->lists.push_back(std::move(list_));
      if (last_dict) parking->dicts.push_back(std::move(dict_));
    } catch (const std::bad_alloc&) {
      // No room to park it: the member's destructor frees it here, recursively.
    }
    return;
  }
  Parked parked;  // allocates only if this container holds containers
  parking = &parked;
  list_.reset();
  dict_.reset();
  while (!parked.lists.empty() || !parked.dicts.empty()) {
    if (!parked.lists.empty()) {
      const std::shared_ptr<List> next = std::move(parked.lists.back());
      parked.lists.pop_back();
      // `next` is freed here, after the pop: its items park their containers in the vector.
    } else {
      const std::shared_ptr<Dict> next = std::move(parked.dicts.back());
      parked.dicts.pop_back();
    }
  }
  parking = nullptr;
}

void Value::swap(Value& other) noexcept {
  std::swap(kind_, other.kind_);
  std::swap(bool_, other.bool_);
  std::swap(namespace_, other.namespace_);
  std::swap(tuple_, other.tuple_);
  std::swap(int_, other.int_);
  std::swap(float_, other.float_);
  string_.swap(other.string_);
  list_.swap(other.list_);
  dict_.swap(other.dict_);
}

Value& Value::operator=(Value other) noexcept {
  swap(other);
  return *this;  // `other` now holds the value replaced, and its destructor frees it
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}
Value Value::floating(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::dict(Names items, bool is_namespace) {
  Value v;
  v.kind_ = Kind::kDict;
  v.namespace_ = is_namespace;
  auto entries = std::make_shared<Dict>();
  entries->reserve(items.size());
  for (auto& entry : items) {
    entries->emplace_back(Value::string(std::move(entry.first)), std::move(entry.second));
  }
  v.dict_ = std::move(entries);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0.0;
    case Kind::kString:
      return !string_->empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->empty();
  }
  return false;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *string_;
    default:
      return repr();
  }
}

void check_text_size(size_t bytes, const std::string& what) {
  if (bytes > kMaxTextBytes) throw std::runtime_error(what + " exceeds 64 MiB");
}

std::string Value::repr() const {
  std::string out;
  repr_into(out);
  return out;
}

// Into one buffer, checked as it grows: a dict holding one dict twice at each of 40 levels took
// 17 s to refuse when each level built its own text.
void Value::repr_into(std::string& out) const {
  switch (kind_) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += bool_ ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(int_);
      return;
    case Kind::kFloat:
      out += float_text(float_);
      return;
    case Kind::kString:
      out += python_quote(*string_);
      return;
    case Kind::kList: {
      const ValueDepth level;
      out += tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        (*list_)[i].repr_into(out);
        check_text_size(out.size(), "printing a list");
      }
      if (tuple_ && list_->size() == 1) out += ',';  // Python's (1,)
      out += tuple_ ? ")" : "]";
      return;
    }
    case Kind::kDict: {
      const ValueDepth level;
      out += namespace_ ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, value] : *dict_) {
        if (!first) out += ", ";
        key.repr_into(out);
        out += ": ";
        value.repr_into(out);
        check_text_size(out.size(), "printing a dict");
        first = false;
      }
      out += namespace_ ? "}>" : "}";
      return;
    }
  }
}

std::string Value::to_json(const JsonFormat& format) const {
  std::string out;
  json_into(*this, format, 0, out);
  return out;
}

Value Value::get(const std::string& key) const {
  if (kind_ != Kind::kDict) return {};
  for (const auto& [k, v] : *dict_) {
    if (k.is_string() && k.as_string() == key) return v;
  }
  return {};
}

Value Value::get(const Value& key) const {
  if (kind_ != Kind::kDict) return {};
  for (const auto& [k, v] : *dict_) {
    if (equal(k, key)) return v;
  }
  return {};
}

void Value::set(const std::string& key, Value value) const {
  set(Value::string(key), std::move(value));
}

void Value::set(const Value& key, Value value) const {
  if (key.is_undefined() || key.is_list() || key.is_dict()) {
    throw std::runtime_error(std::string("a ") + key.type_name() + " cannot be a dict key");
  }
  for (auto& [k, v] : *dict_) {
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  dict_->emplace_back(key, std::move(value));
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return namespace_ ? "namespace" : "dict";
  }
  return "?";
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kInt && b.kind() == Value::Kind::kInt) {
      return a.as_int() == b.as_int();
    }
    return a.as_number() == b.as_number();
  }
  // Python: True == 1 and False == 0.0 (so {1: 'a', true: 'b'} is one entry).
  const auto numeric = [](const Value& v) {
    return v.is_number() || v.kind() == Value::Kind::kBool;
  };
  if (numeric(a) && numeric(b) && a.kind() != b.kind()) {
    const auto number = [](const Value& v) {
      return v.kind() == Value::Kind::kBool ? (v.as_bool() ? 1.0 : 0.0) : v.as_number();
    };
    return number(a) == number(b);
  }
  if (a.kind() != b.kind()) return false;
  const ValueDepth level;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return a.as_bool() == b.as_bool();
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.as_list().size() != b.as_list().size()) return false;
      for (size_t i = 0; i < a.as_list().size(); ++i) {
        if (!equal(a.as_list()[i], b.as_list()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [key, value] : a.as_dict()) {
        if (!equal(value, b.get(key))) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace headway::serving::jinja
