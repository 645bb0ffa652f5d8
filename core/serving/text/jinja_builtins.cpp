#include "jinja_builtins.h"

#include <headway/core/utf8.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <set>
#include <stdexcept>

namespace headway::serving::jinja {
namespace {

using std::runtime_error;

Value attribute_at(const Value& item, const std::string& path);
int order(const Value& a, const Value& b, bool case_sensitive);
bool less(const Value& a, const Value& b, bool case_sensitive) {
  return order(a, b, case_sensitive) < 0;
}

const std::set<std::string, std::less<>> kFilters = {
    "trim",  "length",  "count",     "upper",   "lower",  "capitalize", "default",    "d",
    "join",  "tojson",  "items",     "first",   "last",   "list",       "string",     "int",
    "float", "replace", "safe",      "select",  "reject", "selectattr", "rejectattr", "map",
    "abs",   "unique",  "wordcount", "reverse", "sort",   "dictsort",   "indent",     "min",
    "max",   "title",   "round",     "sum"};
const std::set<std::string, std::less<>> kTests = {
    "defined", "undefined",   "none",     "string",   "number",      "integer", "float",
    "boolean", "mapping",     "iterable", "sequence", "true",        "false",   "odd",
    "even",    "divisibleby", "equalto",  "eq",       "ne",          "in",      "lt",
    "le",      "gt",          "ge",       "lessthan", "greaterthan", "lower",   "upper"};
const std::set<std::string, std::less<>> kFunctions = {"raise_exception", "namespace", "range",
                                                       "strftime_now", "dict"};
const std::set<std::string, std::less<>> kMethods = {
    "strip",        "lstrip",       "rstrip",     "upper",   "lower",   "startswith", "endswith",
    "split",        "replace",      "capitalize", "title",   "items",   "keys",       "values",
    "get",          "format",       "splitlines", "count",   "join",    "find",       "rfind",
    "removeprefix", "removesuffix", "isdigit",    "isspace", "islower", "isupper"};

// Jinja2's own filters, tests and globals, and the methods of Python's str, dict and list, that
// Headway lacks: a template naming one is refused when it loads (Jinja2 would run it), where a name
// that Jinja2 does not know either fails only where Jinja2 fails it.
const std::set<std::string, std::less<>> kJinjaOnlyFilters = {
    "attr",        "batch",    "center",    "e",      "escape",   "filesizeformat",
    "forceescape", "format",   "groupby",   "pprint", "random",   "slice",
    "striptags",   "truncate", "urlencode", "urlize", "wordwrap", "xmlattr"};
const std::set<std::string, std::less<>> kJinjaOnlyTests = {"callable", "escaped", "filter",
                                                            "sameas", "test"};
const std::set<std::string, std::less<>> kJinjaOnlyGlobals = {"lipsum", "cycler", "joiner"};
const std::set<std::string, std::less<>> kPythonOnlyMethods = {
    "casefold", "center",    "encode",    "expandtabs",   "format_map", "index",       "isalnum",
    "isalpha",  "isascii",   "isdecimal", "isidentifier", "isnumeric",  "isprintable", "istitle",
    "ljust",    "maketrans", "partition", "rindex",       "rjust",      "rpartition",  "rsplit",
    "swapcase", "translate", "zfill",     "copy",         "fromkeys"};

// What str.isspace() calls whitespace in ASCII; split() and strip() also take the non-ASCII
// spaces (python_space_length).
constexpr std::string_view kWhitespace = " \t\n\r\f\v\x1c\x1d\x1e\x1f";

// The byte length of the character at the start of `bytes` (1 for a byte that starts none).
size_t character_length(std::string_view bytes) {
  const size_t n = core::utf8::complete_length(bytes);
  return n == 0 ? 1 : n;
}

// The byte length of the whitespace character (Python's str.isspace()) at the start of `bytes`;
// 0 when it starts with something else.
size_t python_space_length(std::string_view bytes) {
  if (bytes.empty()) return 0;
  if (static_cast<unsigned char>(bytes[0]) < 0x80) {
    return kWhitespace.find(bytes[0]) != std::string_view::npos ? 1 : 0;
  }
  const size_t n = core::utf8::complete_length(bytes);
  if (n == 0) return 0;
  const char32_t c = core::utf8::first_code_point(bytes);
  const bool space = c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
                     c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
  return space ? n : 0;
}

// The same for the character that ends `bytes`.
size_t python_space_length_before(std::string_view bytes) {
  for (size_t n = 1; n <= std::min<size_t>(4, bytes.size()); ++n) {
    const std::string_view last = bytes.substr(bytes.size() - n);
    if ((static_cast<unsigned char>(last[0]) & 0xC0) == 0x80) continue;  // inside a character
    return python_space_length(last) == n ? n : 0;
  }
  return 0;
}

void expect_count(const std::string& what, const Arguments& args, size_t min, size_t max) {
  if (args.size() < min || args.size() > max) {
    throw runtime_error(
        what + " takes " +
        (min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max)) +
        " argument(s), got " + std::to_string(args.size()));
  }
}

const std::string& expect_string(const std::string& what, const Value& v) {
  if (!v.is_string()) {
    throw runtime_error(what + " needs a string, got " + std::string(v.type_name()));
  }
  return v.as_string();
}

Value keyword(const KeywordArguments& kwargs, std::string_view name) {
  for (const auto& [key, value] : kwargs) {
    if (key == name) return value;
  }
  return {};
}

void no_keywords(const std::string& what, const KeywordArguments& kwargs,
                 std::initializer_list<std::string_view> allowed = {}) {
  for (const auto& [key, value] : kwargs) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw runtime_error(what + " has no argument '" + key + "'");
    }
  }
}

// Python's str.strip/lstrip/rstrip: whitespace when `chars` is null, else any of its characters.
std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  std::vector<std::string> set;
  if (chars) {
    for (size_t i = 0; i < chars->size();) {
      const size_t n = character_length(std::string_view(*chars).substr(i));
      set.push_back(chars->substr(i, n));
      i += n;
    }
  }
  // The length of the stripped character at the start (or, `from_end`, the end) of `text`.
  const auto strippable = [&](std::string_view text, bool from_end) -> size_t {
    if (!chars) return from_end ? python_space_length_before(text) : python_space_length(text);
    for (const std::string& c : set) {
      if (from_end ? text.ends_with(c) : text.starts_with(c)) return c.size();
    }
    return 0;
  };
  std::string_view view(s);
  if (left) {
    while (const size_t n = strippable(view, false)) view.remove_prefix(n);
  }
  if (right) {
    while (const size_t n = strippable(view, true)) view.remove_suffix(n);
  }
  return std::string(view);
}

// Python's str.split(sep, maxsplit); a negative maxsplit is no limit.
List split(const std::string& s, const std::string* separator, int64_t maxsplit) {
  List out;
  if (separator) {
    if (separator->empty()) throw runtime_error("split: empty separator");
    size_t pos = 0;
    for (size_t hit; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) &&
                     (hit = s.find(*separator, pos)) != std::string::npos;
         pos = hit + separator->size()) {
      out.push_back(Value::string(s.substr(pos, hit - pos)));
    }
    out.push_back(Value::string(s.substr(pos)));
    return out;
  }
  // Runs of whitespace separate words; the text after the last split keeps its trailing spaces.
  std::string_view rest(s);
  for (;;) {
    while (const size_t n = python_space_length(rest)) rest.remove_prefix(n);
    if (rest.empty()) return out;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(Value::string(std::string(rest)));
      return out;
    }
    size_t end = 0;
    while (end < rest.size() && python_space_length(rest.substr(end)) == 0) {
      end += character_length(rest.substr(end));
    }
    out.push_back(Value::string(std::string(rest.substr(0, end))));
    rest.remove_prefix(end);
  }
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_case(s, false);
  if (!out.empty()) out[0] = ascii_case(out.substr(0, 1), true)[0];
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = ascii_case(std::string(1, c), start)[0];
    start = !letter;
  }
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) throw runtime_error("replace: the text to replace is empty");
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  return out + s.substr(pos);
}

// The items a filter or loop iterates, as a list of their own (see elements()).
List iterate(const std::string& what, const Value& v) {
  List scratch;
  const List& all = elements(what, v, scratch);
  if (&all == &scratch) return scratch;
  return all;
}

Value items(const Value& v) {
  if (v.is_undefined()) return Value::list();  // Jinja 3.1's items filter
  if (!v.is_dict()) throw runtime_error("items needs a dict, got " + std::string(v.type_name()));
  List out;
  for (const auto& [key, value] : v.as_dict()) out.push_back(Value::tuple({key, value}));
  return Value::list(std::move(out));
}

// Python's int() of a float, as Jinja's int filter takes it: NaN is a ValueError, which the
// filter turns into its default 0; an infinity is an OverflowError, and past 64 bits Python's int
// is one Headway's cannot hold: both an error naming the value. A plain cast was undefined there
// (1e300, -1e300 and nan all gave INT64_MIN; helper-151's fuzzer).
int64_t float_to_int(const std::string& what, double f, std::string_view written) {
  if (std::isnan(f)) return 0;
  if (f >= -0x1p63 && f < 0x1p63) return static_cast<int64_t>(f);
  throw runtime_error(what + ": " + std::string(written) +
                      " is past the 64-bit integers Headway's templates compute with");
}

int64_t to_int(const std::string& what, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kInt:
      return v.as_int();
    case Value::Kind::kFloat:
      return float_to_int(what, v.as_number(), v.str());
    case Value::Kind::kBool:
      return v.as_bool() ? 1 : 0;
    case Value::Kind::kString: {
      // Jinja's int filter: int() of the text without its spaces, else int(float()) of it, else 0.
      std::string_view text(v.as_string());
      while (!text.empty() && kWhitespace.find(text.front()) != std::string_view::npos) {
        text.remove_prefix(1);
      }
      while (!text.empty() && kWhitespace.find(text.back()) != std::string_view::npos) {
        text.remove_suffix(1);
      }
      if (text.starts_with('+')) text.remove_prefix(1);
      int64_t i = 0;
      const auto whole = std::from_chars(text.data(), text.data() + text.size(), i);
      if (whole.ec == std::errc() && whole.ptr == text.data() + text.size()) return i;
      double f = 0.0;
      const auto real = std::from_chars(text.data(), text.data() + text.size(), f);
      if (real.ec == std::errc() && real.ptr == text.data() + text.size()) {
        return float_to_int(what, f, "'" + std::string(text) + "'");
      }
      return 0;
    }
    default:
      return 0;
  }
}

Value select(const std::string& name, const Value& target, const Arguments& args) {
  const bool by_attribute = name == "selectattr" || name == "rejectattr";
  const bool keep_matches = name == "select" || name == "selectattr";
  Arguments rest = args;
  std::string attribute;
  if (by_attribute) {
    if (rest.empty()) throw runtime_error(name + " needs an attribute name");
    attribute = expect_string(name, rest.front());
    rest.erase(rest.begin());
  }
  std::string test;
  if (!rest.empty()) {
    test = expect_string(name, rest.front());
    rest.erase(rest.begin());
    if (!is_test(test)) throw runtime_error(name + ": unknown test '" + test + "'");
  }
  List out;
  for (const Value& item : iterate(name, target)) {
    const Value subject = by_attribute ? attribute_at(item, attribute) : item;
    const bool match = test.empty() ? subject.truthy() : apply_test(test, subject, rest);
    if (match == keep_matches) out.push_back(item);
  }
  return Value::list(std::move(out));
}

// The byte length of the line break (Python's str.splitlines()) at the start of `bytes`; 0 when
// it starts with something else.
size_t line_break_length(std::string_view bytes) {
  if (bytes.starts_with("\r\n")) return 2;
  if (!bytes.empty() &&
      std::string_view("\n\r\v\f\x1c\x1d\x1e").find(bytes[0]) != std::string_view::npos) {
    return 1;
  }
  if (bytes.starts_with("\xC2\x85")) return 2;                                           // U+0085
  if (bytes.starts_with("\xE2\x80\xA8") || bytes.starts_with("\xE2\x80\xA9")) return 3;  // U+2028/9
  return 0;
}

// Python's str.splitlines(): the lines without their breaks; a final break ends the last line.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    if (const size_t n = line_break_length(text.substr(i))) {
      lines.push_back(text.substr(start, i - start));
      i += n;
      start = i;
    } else {
      ++i;
    }
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

// Jinja's title filter: each word (after spaces, '-', '(', '{', '[' or '<') starts upper case and
// goes on lower case.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool separator = python_space_length(std::string_view(s).substr(i)) > 0 ||
                           std::string_view("-({[<").find(c) != std::string_view::npos;
    if (separator) {
      out += c;
      word_start = true;
      continue;
    }
    out += ascii_case(std::string(1, c), word_start)[0];
    word_start = false;
  }
  return out;
}

// The character index (Python's str index) of byte offset `at` in `s`.
int64_t character_index(const std::string& s, size_t at) {
  int64_t index = 0;
  for (size_t i = 0; i < at; i += character_length(std::string_view(s).substr(i))) ++index;
  return index;
}

// Jinja's round(precision=0, method='common'|'ceil'|'floor'); common is Python's round(), which
// rounds half to even on the exact binary value, as printf does.
Value round_number(const std::string& what, const Value& target, const Arguments& args,
                   const KeywordArguments& kwargs) {
  no_keywords(what, kwargs, {"precision", "method"});
  expect_count(what, args, 0, 2);
  const Value precision = !args.empty() ? args[0] : keyword(kwargs, "precision");
  const Value method = args.size() > 1 ? args[1] : keyword(kwargs, "method");
  const int64_t digits = precision.is_undefined()                ? 0
                         : precision.kind() == Value::Kind::kInt ? precision.as_int()
                                                                 : -1;
  if (digits < 0 || digits > 17) throw runtime_error(what + ": precision must be 0 to 17");
  const std::string how = method.is_undefined() ? "common" : expect_string(what, method);
  if (how != "common" && how != "ceil" && how != "floor") {
    throw runtime_error(what + ": method must be 'common', 'ceil' or 'floor'");
  }
  if (!target.is_number()) throw runtime_error(what + " needs a number");
  if (how == "common") {
    if (target.kind() == Value::Kind::kInt) return target;  // Python's round of an int
    char text[400];
    std::snprintf(text, sizeof(text), "%.*f", static_cast<int>(digits), target.as_number());
    return Value::floating(std::strtod(text, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(digits));
  const double scaled = target.as_number() * scale;
  return Value::floating((how == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

// Jinja's sum(attribute=None, start=0), of numbers.
Value sum_numbers(const std::string& what, const Value& target, const Arguments& args,
                  const KeywordArguments& kwargs) {
  no_keywords(what, kwargs, {"attribute", "start"});
  expect_count(what, args, 0, 2);
  const Value attribute = !args.empty() ? args[0] : keyword(kwargs, "attribute");
  Value total = args.size() > 1 ? args[1] : keyword(kwargs, "start");
  if (total.is_undefined()) total = Value::integer(0);
  const bool by_attribute = !attribute.is_undefined() && !attribute.is_none();
  const std::string path = by_attribute ? expect_string(what, attribute) : std::string();
  for (const Value& item : iterate(what, target)) {
    const Value v = by_attribute ? attribute_at(item, path) : item;
    if (!v.is_number() || !total.is_number()) {
      throw runtime_error(what + " adds numbers, not a " + std::string(v.type_name()));
    }
    int64_t sum = 0;
    if (v.kind() == Value::Kind::kInt && total.kind() == Value::Kind::kInt &&
        !__builtin_add_overflow(total.as_int(), v.as_int(), &sum)) {
      total = Value::integer(sum);
    } else {
      total = Value::floating(total.as_number() + v.as_number());
    }
  }
  return total;
}

// tojson's arguments as Hugging Face's tojson takes them: (ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), positionally or by name.
JsonFormat json_format(const std::string& what, const Arguments& args,
                       const KeywordArguments& kwargs) {
  no_keywords(what, kwargs, {"ensure_ascii", "indent", "separators", "sort_keys"});
  expect_count(what, args, 0, 4);
  const auto argument = [&](size_t position, std::string_view name) {
    return position < args.size() ? args[position] : keyword(kwargs, name);
  };
  JsonFormat format;
  format.ensure_ascii = argument(0, "ensure_ascii").truthy();
  const Value indent = argument(1, "indent");
  if (indent.kind() == Value::Kind::kInt) {
    if (indent.as_int() > (1 << 20)) throw runtime_error(what + ": indent is over 1 MiB");
    format.indent = static_cast<int>(std::max<int64_t>(indent.as_int(), 0));
    format.item_separator = ",";
  } else if (indent.is_string()) {
    throw runtime_error(what + ": an indent given as a string is not supported; give a number");
  } else if (!indent.is_undefined() && !indent.is_none()) {
    throw runtime_error(what + ": indent must be an integer");
  }
  const Value separators = argument(2, "separators");
  if (!separators.is_undefined() && !separators.is_none()) {
    if (!separators.is_list() || separators.as_list().size() != 2 ||
        !separators.as_list()[0].is_string() || !separators.as_list()[1].is_string()) {
      throw runtime_error(what + ": separators must be a pair of strings, such as (',', ':')");
    }
    format.item_separator = separators.as_list()[0].as_string();
    format.key_separator = separators.as_list()[1].as_string();
  }
  format.sort_keys = argument(3, "sort_keys").truthy();
  return format;
}

// Python's ordering of the values sort and dictsort compare (numbers, strings, and lists of
// them): negative, 0 or positive. Strings compare lower-cased unless `case_sensitive`, as Jinja's
// sort filters do. Three-way, so that a list is walked once: asking "a < b, else b < a" of every
// element walked nested lists twice a level (two lists nested 60 deep took 2^60 calls).
int order(const Value& a, const Value& b, bool case_sensitive) {
  // Python orders booleans as the numbers 0 and 1.
  const auto numeric = [](const Value& v) {
    return v.is_number() || v.kind() == Value::Kind::kBool;
  };
  const auto number = [](const Value& v) {
    return v.kind() == Value::Kind::kBool ? (v.as_bool() ? 1.0 : 0.0) : v.as_number();
  };
  const auto sign = [](const auto& x, const auto& y) { return x < y ? -1 : (y < x ? 1 : 0); };
  if (numeric(a) && numeric(b)) {
    if (a.kind() == Value::Kind::kInt && b.kind() == Value::Kind::kInt)
      return sign(a.as_int(), b.as_int());
    return sign(number(a), number(b));  // NaN: neither below nor above
  }
  if (a.is_string() && b.is_string()) {
    return case_sensitive
               ? sign(a.as_string(), b.as_string())
               : sign(ascii_case(a.as_string(), false), ascii_case(b.as_string(), false));
  }
  if (a.is_list() && b.is_list()) {
    const ValueDepth level;
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      const int o = order(x[i], y[i], case_sensitive);
      if (o != 0) return o;
    }
    return sign(x.size(), y.size());
  }
  throw runtime_error("cannot compare a " + std::string(a.type_name()) + " with a " +
                      b.type_name() + " to sort them");
}

// The value at a dotted attribute path ("a.b", an integer part indexes a list), as Jinja's
// attribute= arguments read it.
Value attribute_at(const Value& item, const std::string& path) {
  Value v = item;
  size_t pos = 0;
  for (;;) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? dot : dot - pos);
    size_t i = 0;
    const auto parsed = std::from_chars(part.data(), part.data() + part.size(), i);
    const bool index = !part.empty() && parsed.ec == std::errc() &&
                       parsed.ptr == part.data() + part.size() && part.front() != '-';
    if (v.is_list() && index) {
      v = i < v.as_list().size() ? v.as_list()[i] : Value();
    } else if (v.is_dict() && index &&
               !v.get(Value::integer(static_cast<int64_t>(i))).is_undefined()) {
      v = v.get(Value::integer(static_cast<int64_t>(i)));  // Jinja reads a digit part as an int
    } else {
      v = v.get(part);
    }
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

// sort(reverse=False, case_sensitive=False, attribute=None): a list (attribute may name several
// keys, "a,b"); dictsort(case_sensitive=False, by='key', reverse=False): a dict's [key, value]
// pairs. Both stable, as Python's sorted().
Value sort(const std::string& what, const std::string& name, const Value& target,
           const Arguments& args, const KeywordArguments& kwargs) {
  const bool dictsort = name == "dictsort";
  const std::vector<std::string_view> order =
      dictsort ? std::vector<std::string_view>{"case_sensitive", "by", "reverse"}
               : std::vector<std::string_view>{"reverse", "case_sensitive", "attribute"};
  for (const auto& [key, value] : kwargs) {
    if (std::find(order.begin(), order.end(), key) == order.end()) {
      throw runtime_error(what + " has no argument '" + key + "'");
    }
  }
  expect_count(what, args, 0, order.size());
  const auto argument = [&](std::string_view key) {
    const auto at = static_cast<size_t>(std::find(order.begin(), order.end(), key) - order.begin());
    return at < args.size() ? args[at] : keyword(kwargs, key);
  };
  const bool reverse = argument("reverse").truthy();
  const bool case_sensitive = argument("case_sensitive").truthy();
  List all;
  std::function<Value(const Value&)> key_of = [](const Value& item) { return item; };
  if (dictsort) {
    if (!target.is_dict()) throw runtime_error(what + " needs a dict, got " + target.type_name());
    all = items(target).as_list();
    const Value by = argument("by");
    const std::string by_text = by.is_undefined() ? "key" : by.str();
    if (by_text != "key" && by_text != "value") {
      throw runtime_error(what + ": by must be 'key' or 'value'");
    }
    const size_t part = by_text == "key" ? 0 : 1;
    key_of = [part](const Value& pair) { return pair.as_list()[part]; };
  } else {
    all = iterate(what, target);
    const Value attribute = argument("attribute");
    if (!attribute.is_undefined() && !attribute.is_none()) {
      std::vector<std::string> paths;
      const std::string& text = expect_string(what, attribute);
      for (size_t pos = 0;;) {
        const size_t comma = text.find(',', pos);
        paths.push_back(text.substr(pos, comma == std::string::npos ? comma : comma - pos));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
      key_of = [paths](const Value& item) {
        if (paths.size() == 1) return attribute_at(item, paths[0]);
        List keys;
        for (const std::string& path : paths) keys.push_back(attribute_at(item, path));
        return Value::list(std::move(keys));
      };
    }
  }
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  keyed.reserve(all.size());
  for (const Value& item : all) keyed.emplace_back(key_of(item), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less(b.first, a.first, case_sensitive)
                   : less(a.first, b.first, case_sensitive);
  });
  List out;
  out.reserve(keyed.size());
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

// min/max(case_sensitive=False, attribute=None): the first smallest (largest) item, by `attribute`
// when given; undefined for an empty sequence.
Value extreme(const std::string& what, bool largest, const Value& target, const Arguments& args,
              const KeywordArguments& kwargs) {
  no_keywords(what, kwargs, {"case_sensitive", "attribute"});
  expect_count(what, args, 0, 2);
  const bool case_sensitive = (args.empty() ? keyword(kwargs, "case_sensitive") : args[0]).truthy();
  const Value attribute = args.size() > 1 ? args[1] : keyword(kwargs, "attribute");
  const bool by_attribute = !attribute.is_undefined() && !attribute.is_none();
  const std::string path = by_attribute ? expect_string(what, attribute) : std::string();
  Value best;
  Value best_key;
  for (const Value& item : iterate(what, target)) {
    const Value key = by_attribute ? attribute_at(item, path) : item;
    if (best.is_undefined() ||
        (largest ? less(best_key, key, case_sensitive) : less(key, best_key, case_sensitive))) {
      best = item;
      best_key = key;
    }
  }
  return best;
}

// Python's str.format: {} and {0} take positional arguments, {name} keyword ones, {{ and }} are
// braces. Format specs and conversions ({:>4}, {!r}) are refused, naming the field.
std::string python_format(const std::string& what, const std::string& pattern,
                          const Arguments& args, const KeywordArguments& kwargs) {
  std::string out;
  size_t next_automatic = 0;
  bool automatic = false;
  bool numbered = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '}') {
      if (i + 1 >= pattern.size() || pattern[i + 1] != '}') {
        throw runtime_error(what + ": a single '}' (write '}}' for a brace)");
      }
      ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = pattern.find('}', i);
    if (close == std::string::npos) throw runtime_error(what + ": a '{' is never closed");
    const std::string field = pattern.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      throw runtime_error(what + ": field {" + field +
                          "} uses a format spec, a conversion or an "
                          "attribute, which are not supported");
    }
    if (field.empty() ||
        std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      // Python refuses to mix {} with {0}.
      if (field.empty() ? numbered : automatic) {
        throw runtime_error(what + ": cannot mix automatic ({}) and numbered ({0}) fields");
      }
      (field.empty() ? automatic : numbered) = true;
      size_t index = next_automatic;
      if (field.empty()) {
        ++next_automatic;
      } else if (std::from_chars(field.data(), field.data() + field.size(), index).ec !=
                 std::errc()) {
        index = args.size();  // too large to be any argument's
      }
      if (index >= args.size()) {
        throw runtime_error(what + ": no positional argument for field {" + field + "}");
      }
      out += args[index].str();
    } else {
      const Value named = keyword(kwargs, field);
      if (named.is_undefined()) throw runtime_error(what + ": no argument named '" + field + "'");
      out += named.str();
    }
    i = close;
  }
  return out;
}

// indent(width=4, first=False, blank=False): spaces (or the given text) before each line but the
// first (and the first too with first=True); blank lines stay empty unless blank=True.
Value indent(const std::string& what, const Value& target, const Arguments& args,
             const KeywordArguments& kwargs) {
  no_keywords(what, kwargs, {"width", "first", "blank"});
  expect_count(what, args, 0, 3);
  const auto argument = [&](size_t position, std::string_view name) {
    return position < args.size() ? args[position] : keyword(kwargs, name);
  };
  const Value width = argument(0, "width");
  std::string prefix;
  if (width.is_undefined()) {
    prefix = "    ";
  } else if (width.kind() == Value::Kind::kInt) {
    if (width.as_int() > (1 << 20)) throw runtime_error(what + ": width is over 1 MiB");
    prefix.assign(static_cast<size_t>(std::max<int64_t>(width.as_int(), 0)), ' ');
  } else if (width.is_string()) {
    prefix = width.as_string();
  } else {
    throw runtime_error(what + ": width must be an integer or a string");
  }
  const bool first = argument(1, "first").truthy();
  const bool blank = argument(2, "blank").truthy();
  // Python's splitlines() on the text plus "\n", as Jinja does, so that a final newline stays.
  const std::string text = target.str() + "\n";
  const std::vector<std::string_view> lines = split_lines(text);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    const bool indented = (i > 0 || first) && (blank || !lines[i].empty() || (i == 0 && first));
    if (indented) out += prefix;
    out += lines[i];
    check_text_size(out.size(), what + ": the text");
  }
  return Value::string(std::move(out));
}

bool continues_character(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

}  // namespace

// A character begins at every byte that does not continue one, and at the first byte whatever it
// is (text that is not UTF-8 starting with stray continuation bytes: one character, as
// characters() makes it).
size_t character_count(std::string_view text) {
  return core::utf8::code_points(text) + (!text.empty() && continues_character(text[0]) ? 1 : 0);
}

size_t character_offset(std::string_view text, size_t index) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i > 0 && continues_character(text[i])) continue;
    if (seen++ == index) return i;
  }
  return text.size();
}

std::vector<Value> characters(const std::string& text) {
  if (const size_t n = character_count(text); n > kMaxIteratedCharacters) {
    throw std::runtime_error("iterating a string of " + std::to_string(n) +
                             " characters (more than " + std::to_string(kMaxIteratedCharacters) +
                             ")");
  }
  std::vector<Value> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && continues_character(text[i + n])) ++n;
    out.push_back(Value::string(text.substr(i, n)));
    i += n;
  }
  return out;
}

const List& elements(const std::string& what, const Value& v, List& scratch) {
  if (v.is_list()) return v.as_list();
  scratch.clear();
  if (v.is_dict()) {
    for (const auto& [key, value] : v.as_dict()) scratch.push_back(key);
  } else if (v.is_string()) {
    scratch = characters(v.as_string());
  } else if (!v.is_undefined()) {
    throw std::runtime_error(what + ": cannot iterate over a " + std::string(v.type_name()));
  }
  return scratch;
}

bool is_filter(std::string_view name) { return kFilters.contains(name); }
bool is_test(std::string_view name) { return kTests.contains(name); }
bool is_function(std::string_view name) { return kFunctions.contains(name); }
bool is_method(std::string_view name) { return kMethods.contains(name); }
bool lacks_jinja_filter(std::string_view name) { return kJinjaOnlyFilters.contains(name); }
bool lacks_jinja_test(std::string_view name) { return kJinjaOnlyTests.contains(name); }
bool lacks_jinja_global(std::string_view name) { return kJinjaOnlyGlobals.contains(name); }
bool lacks_python_method(std::string_view name) { return kPythonOnlyMethods.contains(name); }

Value apply_filter(const std::string& name, const Value& target, const Arguments& args,
                   const KeywordArguments& kwargs) {
  const std::string what = "filter '" + name + "'";
  if (!is_filter(name)) throw runtime_error("unknown " + what);
  if (name == "default" || name == "d") {
    no_keywords(what, kwargs, {"default_value", "boolean"});
    expect_count(what, args, 0, 2);
    Value fallback = args.empty() ? keyword(kwargs, "default_value") : args[0];
    if (fallback.is_undefined()) fallback = Value::string("");
    const bool boolean = args.size() > 1 ? args[1].truthy() : keyword(kwargs, "boolean").truthy();
    return (target.is_undefined() || (boolean && !target.truthy())) ? fallback : target;
  }
  // An undefined value reaches the other filters as Jinja's Undefined does: text filters read it as
  // "", the others iterate it as empty (a tool parameter without a description, `| trim`, renders
  // as nothing). Those that need a value refuse it, as Jinja does.
  if (target.is_undefined() && (name == "int" || name == "float" || name == "abs")) {
    throw runtime_error(what + " applied to an undefined value");
  }
  if (name == "tojson") return Value::string(target.to_json(json_format(what, args, kwargs)));
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    no_keywords(what, kwargs);
    // Jinja's filters that pick items give nothing for a false sequence, none included
    // (functionary's template filters `tools` when no tools were given).
    if (target.is_none()) return Value::list();
    return select(name, target, args);
  }
  if (name == "min" || name == "max") return extreme(what, name == "max", target, args, kwargs);
  if (name == "round") return round_number(what, target, args, kwargs);
  if (name == "sum") return sum_numbers(what, target, args, kwargs);
  if (name == "map") {
    // map(attribute='x') or map('filter', args...)
    List out;
    if (target.is_none()) return Value::list();  // as select
    const Value attribute = keyword(kwargs, "attribute");
    if (!attribute.is_undefined()) {
      no_keywords(what, kwargs, {"attribute", "default"});
      expect_count(what, args, 0, 0);
      const Value fallback = keyword(kwargs, "default");
      const std::string& key = expect_string(what, attribute);
      for (const Value& item : iterate(what, target)) {
        const Value v = attribute_at(item, key);
        out.push_back(v.is_undefined() ? fallback : v);
      }
      return Value::list(std::move(out));
    }
    if (args.empty()) throw runtime_error(what + " needs a filter name or attribute=");
    const std::string& filter = expect_string(what, args[0]);
    if (!is_filter(filter)) throw runtime_error(what + ": unknown filter '" + filter + "'");
    const Arguments rest(args.begin() + 1, args.end());
    for (const Value& item : iterate(what, target)) {
      out.push_back(apply_filter(filter, item, rest, kwargs));
    }
    return Value::list(std::move(out));
  }
  if (name == "join") {
    no_keywords(what, kwargs, {"d", "attribute"});
    expect_count(what, args, 0, 1);
    const std::string separator =
        args.empty() ? keyword(kwargs, "d").str() : expect_string(what, args[0]);
    const Value attribute = keyword(kwargs, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(what, target)) {
      if (!first) out += separator;
      first = false;
      out += attribute.is_undefined() ? item.str() : attribute_at(item, attribute.str()).str();
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    no_keywords(what, kwargs);
    expect_count(what, args, 2, 2);
    return Value::string(
        replace_all(target.str(), expect_string(what, args[0]), expect_string(what, args[1])));
  }
  if (name == "sort" || name == "dictsort") return sort(what, name, target, args, kwargs);
  if (name == "indent") return indent(what, target, args, kwargs);
  no_keywords(what, kwargs);
  if (name == "trim") {
    expect_count(what, args, 0, 1);
    const bool all_space = args.empty() || args[0].is_none();
    return Value::string(
        strip(target.str(), all_space ? nullptr : &expect_string(what, args[0]), true, true));
  }
  expect_count(what, args, 0, 0);
  if (name == "length" || name == "count") {
    if (target.is_string()) {
      return Value::integer(static_cast<int64_t>(character_count(target.as_string())));
    }
    if (target.is_list()) return Value::integer(static_cast<int64_t>(target.as_list().size()));
    if (target.is_dict()) return Value::integer(static_cast<int64_t>(target.as_dict().size()));
    if (target.is_undefined()) return Value::integer(0);
    throw runtime_error(what + ": a " + std::string(target.type_name()) + " has no length");
  }
  if (name == "upper") return Value::string(ascii_case(target.str(), true));
  if (name == "lower") return Value::string(ascii_case(target.str(), false));
  if (name == "capitalize") return Value::string(capitalize(target.str()));
  if (name == "title") return Value::string(jinja_title(target.str()));
  if (name == "string") return Value::string(target.str());
  if (name == "safe") return target;
  if (name == "int") return Value::integer(to_int(what, target));
  if (name == "float") {
    if (target.is_number()) return Value::floating(target.as_number());
    try {
      return Value::floating(std::stod(target.str()));
    } catch (const std::exception&) {
      return Value::floating(0.0);
    }
  }
  if (name == "abs") {
    if (target.kind() == Value::Kind::kInt) {
      if (target.as_int() == INT64_MIN) throw runtime_error(what + ": integer overflow");
      return Value::integer(std::abs(target.as_int()));
    }
    if (target.is_number()) return Value::floating(std::abs(target.as_number()));
    throw runtime_error(what + " needs a number");
  }
  if (name == "items") return items(target);
  if (name == "list") return Value::list(iterate(what, target));
  if (name == "reverse") {
    List all = iterate(what, target);
    std::reverse(all.begin(), all.end());
    if (!target.is_string()) return Value::list(std::move(all));
    std::string text;
    for (const Value& c : all) text += c.as_string();
    return Value::string(std::move(text));
  }
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char c : target.str()) {
      const bool space = kWhitespace.find(c) != std::string_view::npos;
      if (!space && !in_word) ++words;
      in_word = !space;
    }
    return Value::integer(words);
  }
  if (name == "unique") {
    List out;
    for (const Value& item : iterate(what, target)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& v) { return equal(v, item); })) {
        out.push_back(item);
      }
    }
    return Value::list(std::move(out));
  }
  if ((name == "first" || name == "last") && target.is_string()) {
    const std::string& s = target.as_string();
    const size_t n = character_count(s);
    if (n == 0) return {};
    const size_t at = character_offset(s, name == "first" ? 0 : n - 1);
    return Value::string(s.substr(at, character_offset(s, name == "first" ? 1 : n) - at));
  }
  if (name == "first" || name == "last") {
    List scratch;
    const List& all = elements(what, target, scratch);
    if (all.empty()) return {};
    return name == "first" ? all.front() : all.back();
  }
  throw runtime_error("unknown " + what);
}

bool apply_test(const std::string& name, const Value& target, const Arguments& args) {
  const std::string what = "test '" + name + "'";
  if (!is_test(name)) throw runtime_error("unknown " + what);
  const bool ordering = name == "lt" || name == "le" || name == "gt" || name == "ge" ||
                        name == "lessthan" || name == "greaterthan";
  const bool binary = ordering || name == "divisibleby" || name == "equalto" || name == "eq" ||
                      name == "ne" || name == "in";
  expect_count(what, args, binary ? 1 : 0, binary ? 1 : 0);
  if (name == "defined") return !target.is_undefined();
  if (name == "undefined") return target.is_undefined();
  if (ordering) {
    const bool below = less(target, args[0], /*case_sensitive=*/true);
    const bool above = less(args[0], target, /*case_sensitive=*/true);
    if (name == "lt" || name == "lessthan") return below;
    if (name == "le") return !above;
    if (name == "gt" || name == "greaterthan") return above;
    return !below;
  }
  if (name == "lower" || name == "upper") {  // str(value).islower() / isupper()
    const std::string text = target.str();
    bool cased = false;
    for (char c : text) {
      const bool lower = c >= 'a' && c <= 'z';
      const bool upper = c >= 'A' && c <= 'Z';
      if ((name == "lower" && upper) || (name == "upper" && lower)) return false;
      cased = cased || lower || upper;
    }
    return cased;
  }
  if (name == "none") return target.is_none();
  if (name == "string") return target.is_string();
  if (name == "number") return target.is_number();
  if (name == "integer") return target.kind() == Value::Kind::kInt;
  if (name == "float") return target.kind() == Value::Kind::kFloat;
  if (name == "boolean") return target.kind() == Value::Kind::kBool;
  if (name == "true") return target.kind() == Value::Kind::kBool && target.as_bool();
  if (name == "false") return target.kind() == Value::Kind::kBool && !target.as_bool();
  if (name == "mapping") return target.is_dict();
  if (name == "iterable") return target.is_list() || target.is_dict() || target.is_string();
  if (name == "sequence") return target.is_list() || target.is_dict() || target.is_string();
  if (name == "equalto" || name == "eq") return equal(target, args[0]);
  if (name == "ne") return !equal(target, args[0]);
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (target.kind() != Value::Kind::kInt) throw runtime_error(what + " needs an integer");
    if (name == "odd") return target.as_int() % 2 != 0;
    if (name == "even") return target.as_int() % 2 == 0;
    if (args[0].kind() != Value::Kind::kInt || args[0].as_int() == 0) {
      throw runtime_error(what + " needs a non-zero integer divisor");
    }
    return target.as_int() % args[0].as_int() == 0;
  }
  if (name == "in") {
    const Value& container = args[0];
    if (container.is_string() && target.is_string()) {
      return container.as_string().find(target.as_string()) != std::string::npos;
    }
    List scratch;
    const List& all = elements(what, container, scratch);
    return std::any_of(all.begin(), all.end(), [&](const Value& v) { return equal(v, target); });
  }
  throw runtime_error("unknown " + what);
}

Value call_function(const std::string& name, const Arguments& args,
                    const KeywordArguments& kwargs) {
  const std::string what = "function '" + name + "'";
  if (!is_function(name)) throw runtime_error("unknown " + what);
  if (name == "namespace") {
    expect_count(what, args, 0, 0);
    Names fields;
    for (const auto& [key, value] : kwargs) fields.emplace_back(key, value);
    return Value::dict(std::move(fields), true);
  }
  if (name == "dict") {  // dict(mapping) and dict(key=value, ...)
    expect_count(what, args, 0, 1);
    if (!args.empty() && !args[0].is_dict()) {
      throw runtime_error(what + " takes a dict, not a " + std::string(args[0].type_name()));
    }
    Value out = Value::dict();
    if (!args.empty()) {
      for (const auto& [key, value] : args[0].as_dict()) out.set(key, value);
    }
    for (const auto& [key, value] : kwargs) out.set(key, value);
    return out;
  }
  no_keywords(what, kwargs);
  if (name == "range") {
    expect_count(what, args, 1, 3);
    for (const Value& a : args) {
      if (a.kind() != Value::Kind::kInt) throw runtime_error(what + " needs integers");
    }
    const int64_t start = args.size() > 1 ? args[0].as_int() : 0;
    const int64_t stop = args.size() > 1 ? args[1].as_int() : args[0].as_int();
    const int64_t step = args.size() > 2 ? args[2].as_int() : 1;
    if (step == 0) throw runtime_error(what + ": the step is 0");
    List out;
    constexpr size_t kMaxItems = 1'000'000;  // a template has no business with more
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (out.size() == kMaxItems) throw runtime_error(what + ": more than 1000000 items");
      out.push_back(Value::integer(i));
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return Value::list(std::move(out));
  }
  if (name == "strftime_now") {
    expect_count(what, args, 1, 1);
    const std::string& format = expect_string(what, args[0]);
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[256];
    const size_t n = std::strftime(buffer, sizeof(buffer), format.c_str(), &local);
    return Value::string(std::string(buffer, n));
  }
  throw runtime_error("unknown " + what);
}

Value call_method(const std::string& name, const Value& target, const Arguments& args,
                  const KeywordArguments& kwargs) {
  const std::string what = "method '" + name + "'";
  if (!is_method(name)) {
    throw runtime_error("a " + std::string(target.type_name()) + " has no " + what);
  }
  if (name == "format" && target.is_string()) {
    return Value::string(python_format(what, target.as_string(), args, kwargs));
  }
  if (name == "split" && target.is_string()) {
    no_keywords(what, kwargs, {"sep", "maxsplit"});
    expect_count(what, args, 0, 2);
    const Value separator = !args.empty() ? args[0] : keyword(kwargs, "sep");
    const Value maxsplit = args.size() > 1 ? args[1] : keyword(kwargs, "maxsplit");
    if (!maxsplit.is_undefined() && maxsplit.kind() != Value::Kind::kInt) {
      throw runtime_error(what + ": maxsplit must be an integer");
    }
    const bool whitespace = separator.is_undefined() || separator.is_none();
    return Value::list(split(target.as_string(),
                             whitespace ? nullptr : &expect_string(what, separator),
                             maxsplit.is_undefined() ? -1 : maxsplit.as_int()));
  }
  no_keywords(what, kwargs);
  if (target.is_dict()) {
    if (name == "items") {
      expect_count(what, args, 0, 0);
      return items(target);
    }
    if (name == "keys" || name == "values") {
      expect_count(what, args, 0, 0);
      List out;
      for (const auto& [key, value] : target.as_dict()) {
        out.push_back(name == "keys" ? key : value);
      }
      return Value::list(std::move(out));
    }
    if (name == "get") {
      expect_count(what, args, 1, 2);
      const Value v = target.get(args[0]);
      return v.is_undefined() ? (args.size() > 1 ? args[1] : Value::none()) : v;
    }
  }
  if (target.is_string()) {
    const std::string& s = target.as_string();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      expect_count(what, args, 0, 1);
      const bool all_space = args.empty() || args[0].is_none();
      return Value::string(strip(s, all_space ? nullptr : &expect_string(what, args[0]),
                                 name != "rstrip", name != "lstrip"));
    }
    if (name == "upper" || name == "lower") {
      expect_count(what, args, 0, 0);
      return Value::string(ascii_case(s, name == "upper"));
    }
    if (name == "capitalize") {
      expect_count(what, args, 0, 0);
      return Value::string(capitalize(s));
    }
    if (name == "title") {
      expect_count(what, args, 0, 0);
      return Value::string(title(s));
    }
    if (name == "splitlines") {
      expect_count(what, args, 0, 0);
      List out;
      for (std::string_view line : split_lines(s)) out.push_back(Value::string(std::string(line)));
      return Value::list(std::move(out));
    }
    if (name == "count") {
      expect_count(what, args, 1, 1);
      const std::string& part = expect_string(what, args[0]);
      if (part.empty()) return Value::integer(static_cast<int64_t>(character_count(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size()))
        ++n;
      return Value::integer(n);
    }
    if (name == "find" || name == "rfind") {
      expect_count(what, args, 1, 1);
      const std::string& part = expect_string(what, args[0]);
      const size_t at = name == "find" ? s.find(part) : s.rfind(part);
      return Value::integer(at == std::string::npos ? -1 : character_index(s, at));
    }
    if (name == "join") {
      expect_count(what, args, 1, 1);
      std::string out;
      bool first = true;
      for (const Value& item : iterate(what, args[0])) {
        if (!item.is_string()) {
          throw runtime_error(what + " joins strings, not a " + std::string(item.type_name()));
        }
        if (!first) out += s;
        first = false;
        out += item.as_string();
        check_text_size(out.size(), what + ": the text");
      }
      return Value::string(std::move(out));
    }
    if (name == "removeprefix" || name == "removesuffix") {
      expect_count(what, args, 1, 1);
      const std::string& affix = expect_string(what, args[0]);
      if (name == "removeprefix")
        return Value::string(s.starts_with(affix) ? s.substr(affix.size()) : s);
      return Value::string(s.ends_with(affix) ? s.substr(0, s.size() - affix.size()) : s);
    }
    if (name == "isdigit" || name == "isspace" || name == "islower" || name == "isupper") {
      expect_count(what, args, 0, 0);
      if (name == "isdigit") {
        return Value::boolean(!s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
          return c >= '0' && c <= '9';
        }));
      }
      if (name == "isspace") {
        std::string_view rest(s);
        while (const size_t n = python_space_length(rest)) rest.remove_prefix(n);
        return Value::boolean(!s.empty() && rest.empty());
      }
      return Value::boolean(apply_test(name == "islower" ? "lower" : "upper", target, {}));
    }
    if (name == "startswith" || name == "endswith") {
      expect_count(what, args, 1, 1);
      const std::string& affix = expect_string(what, args[0]);
      return Value::boolean(name == "startswith" ? s.starts_with(affix) : s.ends_with(affix));
    }
    if (name == "replace") {
      expect_count(what, args, 2, 2);
      return Value::string(
          replace_all(s, expect_string(what, args[0]), expect_string(what, args[1])));
    }
  }
  throw runtime_error("a " + std::string(target.type_name()) + " has no " + what);
}

}  // namespace headway::serving::jinja
