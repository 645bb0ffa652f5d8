#include "regex_syntax.h"

#include <fmt/format.h>
#include <headway/serving/service_error.h>

#include <string_view>

#include "text_reader.h"
#include "utf8_rules.h"

namespace headway::serving::guided {

namespace {

constexpr int kMaxNesting = 128;  // groups inside groups: the parser's recursion

// What the class escapes match. A guided answer must satisfy the pattern in Python (vLLM's
// guided_regex) and in JavaScript (JSON Schema's pattern), which read \d \w \s and '.' alike on
// ASCII but not beyond, so each escape and its complement match only what both engines agree on:
// \d \w \s are ASCII, \D and \W are the ASCII characters outside them, \S is every character
// that is white space in neither engine, and '.' leaves out every line terminator of either.
CodePointSet digits() { return CodePointSet::range('0', '9'); }

// The ASCII characters not in `set`.
CodePointSet ascii_outside(const CodePointSet& set) {
  CodePointSet excluded = set;
  excluded.add(0x80, kMaxCodePoint);
  return excluded.complement();
}

CodePointSet line_terminators() {
  CodePointSet set = CodePointSet::range('\n', '\n');
  set.add('\r', '\r');
  set.add(0x2028, 0x2029);
  return set;
}

// White space to Python or to JavaScript.
CodePointSet any_engines_space() {
  CodePointSet set = CodePointSet::range('\t', '\r');
  set.add(0x1C, 0x20);
  for (const uint32_t c :
       {0x85u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) {
    set.add(c, c);
  }
  set.add(0x2000, 0x200A);
  return set;
}

CodePointSet word_chars() {
  CodePointSet set = CodePointSet::range('a', 'z');
  set.add('A', 'Z');
  set.add('0', '9');
  set.add('_', '_');
  return set;
}

CodePointSet space_chars() {
  CodePointSet set = CodePointSet::range('\t', '\r');  // \t \n \v \f \r
  set.add(' ', ' ');
  return set;
}

class Parser : TextReader {
 public:
  Parser(std::string_view pattern, RegexMatch match, const std::string& field)
      : TextReader(pattern), match_(match), field_(field) {}

  RegexTree parse() {
    if (text_.size() > kMaxPatternBytes) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("{}: the regular expression is {} bytes; at most {} are taken",
                                     field_, text_.size(), kMaxPatternBytes),
                         field_);
    }
    tree_.root = alternation(0);
    if (at_ < text_.size()) fail("an unmatched ')'");
    return std::move(tree_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(at_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    throw ServiceError(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: the regular expression has {} at character {}", field_, what, at), field_);
  }

  uint32_t add(RegexNode node) {
    tree_.nodes.push_back(std::move(node));
    return static_cast<uint32_t>(tree_.nodes.size() - 1);
  }
  uint32_t add_chars(CodePointSet chars) {
    RegexNode node;
    node.kind = RegexKind::kChars;
    node.chars = std::move(chars);
    return add(std::move(node));
  }
  uint32_t add_list(RegexKind kind, std::vector<uint32_t> children) {
    if (children.size() == 1) return children[0];
    RegexNode node;
    node.kind = children.empty() ? RegexKind::kEmpty : kind;
    node.children = std::move(children);
    return add(std::move(node));
  }
  // Any string: what a search pattern may have around its match.
  uint32_t any_string() {
    RegexNode node;
    node.kind = RegexKind::kRepeat;
    node.children = {add_chars(CodePointSet::all())};
    node.max = kUnboundedRepeat;
    return add(std::move(node));
  }

  uint32_t alternation(int depth) {
    if (depth > kMaxNesting) fail(fmt::format("groups nested more than {} deep", kMaxNesting));
    std::vector<uint32_t> branches{sequence(depth)};
    while (eat('|')) branches.push_back(sequence(depth));
    return add_list(RegexKind::kAlternate, std::move(branches));
  }

  // One alternative. At the top level '^' may open it and '$' close it: they pin a search
  // pattern's match to the string's start or end, and mean nothing for a whole match.
  uint32_t sequence(int depth) {
    const bool top = depth == 0;
    bool pinned_start = false;
    bool pinned_end = false;
    if (top && eat('^')) pinned_start = true;
    std::vector<uint32_t> items;
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        const size_t at = at_++;
        if (top && (!more() || peek() == '|')) {
          pinned_end = true;
          break;
        }
        fail_at(at, "'$' inside the pattern (only at the end of a top-level alternative)");
      }
      if (peek() == '^') {
        fail("'^' inside the pattern (only at the start of a top-level alternative)");
      }
      items.push_back(quantified(depth));
    }
    if (top && match_ == RegexMatch::kSearch) {
      if (!pinned_start) items.insert(items.begin(), any_string());
      if (!pinned_end) items.push_back(any_string());
    }
    return add_list(RegexKind::kConcat, std::move(items));
  }

  uint32_t quantified(int depth) {
    const uint32_t atom = this->atom(depth);
    uint32_t min = 0;
    uint32_t max = 0;
    if (!quantifier(min, max)) return atom;
    if (more() && peek() == '+') fail("a possessive quantifier");
    eat('?');  // lazy: the same strings match
    if (more() && (peek() == '*' || peek() == '+' || peek() == '?' || counted_quantifier_here())) {
      fail("a quantifier on a quantifier (put the inner one in a group)");
    }
    RegexNode node;
    node.kind = RegexKind::kRepeat;
    node.children = {atom};
    node.min = min;
    node.max = max;
    return add(std::move(node));
  }

  // Reads * + ? or a counted {n}, {n,}, {n,m}; false (reading nothing) when none is here. A '{'
  // that does not open a count is a literal, as in Python and JavaScript. {,m} and {,} are
  // refused: Python reads them as counts from 0, JavaScript as text.
  bool quantifier(uint32_t& min, uint32_t& max) {
    if (eat('*')) {
      min = 0;
      max = kUnboundedRepeat;
      return true;
    }
    if (eat('+')) {
      min = 1;
      max = kUnboundedRepeat;
      return true;
    }
    if (eat('?')) {
      min = 0;
      max = 1;
      return true;
    }
    if (!counted_quantifier_here()) return false;
    const size_t open = at_++;
    if (more() && peek() == ',') {
      fail_at(open,
              "a count without a minimum ('{,m}' is a count from 0 to Python, text to "
              "JavaScript: write {0,m})");
    }
    const auto number = [&](uint32_t fallback) {
      if (!more() || peek() < '0' || peek() > '9') return fallback;
      uint64_t value = 0;
      while (more() && peek() >= '0' && peek() <= '9') {
        value = value * 10 + static_cast<uint64_t>(peek() - '0');
        if (value > kMaxRepeat) fail_at(open, fmt::format("a count above {}", kMaxRepeat));
        ++at_;
      }
      return static_cast<uint32_t>(value);
    };
    min = number(0);
    if (eat(',')) {
      max = number(kUnboundedRepeat);
    } else {
      max = min;
    }
    eat('}');
    if (max < min)
      fail_at(open, fmt::format("a count {{{},{}}} whose maximum is below its minimum", min, max));
    return true;
  }

  bool counted_quantifier_here() const {
    if (!more() || peek() != '{') return false;
    size_t i = at_ + 1;
    const size_t first_digits = i;
    while (i < text_.size() && text_[i] >= '0' && text_[i] <= '9') ++i;
    const bool has_min = i > first_digits;
    if (i < text_.size() && text_[i] == '}') return has_min;
    if (i >= text_.size() || text_[i] != ',') return false;
    ++i;
    while (i < text_.size() && text_[i] >= '0' && text_[i] <= '9') ++i;
    return i < text_.size() && text_[i] == '}';
  }

  uint32_t atom(int depth) {
    const char c = peek();
    if (c == '(') return group(depth);
    if (c == '[') return add_chars(char_class());
    if (c == '.') {
      ++at_;
      return add_chars(line_terminators().complement());
    }
    if (c == '\\') {
      CodePointSet set;
      escape(false, set);
      return add_chars(std::move(set));
    }
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (counted_quantifier_here()) fail("nothing to repeat");
    const uint32_t c_value = character();
    return add_chars(CodePointSet::range(c_value, c_value));
  }

  uint32_t group(int depth) {
    const size_t open = at_++;
    if (eat('?') && !eat(':')) {
      if (starts_with("P<") || (starts_with("<") && !starts_with("<=") && !starts_with("<!"))) {
        at_ += peek() == 'P' ? 2 : 1;
        const size_t name = at_;
        while (more() && peek() != '>' && peek() != ')') ++at_;
        if (!eat('>') || at_ - 1 == name) fail_at(open, "a group name that is not closed by '>'");
      } else if (starts_with("=") || starts_with("!") || starts_with("<=") || starts_with("<!")) {
        fail_at(open, "a lookaround (they describe no set of strings a guide can follow)");
      } else if (starts_with("P=")) {
        fail_at(open, "a backreference");
      } else {
        fail_at(open, "an inline flag or extension group '(?' (not supported)");
      }
    }
    const uint32_t inner = alternation(depth + 1);
    if (!eat(')')) fail_at(open, "an unclosed '('");
    return inner;
  }

  // Reads one literal character (UTF-8) and returns it.
  uint32_t character() {
    uint32_t value = 0;
    const size_t length = decode_utf8(text_, at_, value);
    if (length == 0) fail("a byte that is not UTF-8");
    at_ += length;
    return value;
  }

  uint32_t hex_digits(size_t count) {
    uint32_t value = 0;
    if (!read_hex(count, value)) fail(fmt::format("an escape that needs {} hex digits", count));
    return value;
  }

  // Reads an escape at '\'. Sets `set` to what it matches; true when that is a class (\d, ...),
  // false when a single character. In a class, \b is a backspace.
  bool escape(bool in_class, CodePointSet& set) {
    const size_t at = at_++;
    if (!more()) fail_at(at, "a '\\' at the end");
    const char c = peek();
    ++at_;
    const auto single = [&](uint32_t value) {
      set = CodePointSet::range(value, value);
      return false;
    };
    switch (c) {
      case 'd':
        set = digits();
        return true;
      case 'D':
        set = ascii_outside(digits());
        return true;
      case 'w':
        set = word_chars();
        return true;
      case 'W':
        set = ascii_outside(word_chars());
        return true;
      case 's':
        set = space_chars();
        return true;
      case 'S':
        set = any_engines_space().complement();
        return true;
      case 'n':
        return single('\n');
      case 't':
        return single('\t');
      case 'r':
        return single('\r');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case '0':
        if (more() && peek() >= '0' && peek() <= '9') {
          fail_at(at, "an octal escape (write \\xHH or \\uHHHH)");
        }
        return single(0);
      case 'x':
        return single(hex_digits(2));
      case 'u': {
        uint32_t value = hex_digits(4);
        // A high surrogate followed by a low one is one character (JavaScript writes astral
        // characters so); a lone half is none.
        if (value >= 0xD800 && value <= 0xDBFF && starts_with("\\u")) {
          const size_t low_at = at_;
          at_ += 2;
          const uint32_t low = hex_digits(4);
          if (low < 0xDC00 || low > 0xDFFF)
            fail_at(low_at, "a high surrogate without its low half");
          value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
        }
        if (value >= 0xD800 && value <= 0xDFFF) fail_at(at, "a lone surrogate escape");
        return single(value);
      }
      case 'b':
        if (in_class) return single('\b');
        fail_at(at, "a word boundary '\\b' (not supported)");
      default:
        break;
    }
    if ((c >= '1' && c <= '9') || c == 'k') fail_at(at, "a backreference");
    if (std::string_view("ABZzG").find(c) != std::string_view::npos) {
      fail_at(at, fmt::format("the anchor '\\{}' (not supported)", c));
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      fail_at(at, fmt::format("an unknown escape '\\{}'", c));
    }
    --at_;
    return single(character());
  }

  CodePointSet char_class() {
    const size_t open = at_++;
    const bool negated = eat('^');
    CodePointSet set;
    bool first = true;
    for (;;) {
      if (!more()) fail_at(open, "an unclosed '['");
      if (peek() == ']' && !first) {
        ++at_;
        break;
      }
      if (starts_with("[:")) fail("a POSIX class '[:' (not supported)");
      first = false;
      CodePointSet item;
      uint32_t low = 0;
      if (peek() == '\\') {
        if (escape(true, item)) {
          set.add(item);
          continue;
        }
        low = item.ranges().front().low;  // a single character
      } else {
        low = character();
      }
      // A range: '-' followed by something other than the closing ']'.
      if (more() && peek() == '-' && at_ + 1 < text_.size() && text_[at_ + 1] != ']') {
        const size_t dash = at_++;
        uint32_t high = 0;
        if (peek() == '\\') {
          if (escape(true, item)) fail_at(dash, "a range that ends in a class");
          high = item.ranges().front().low;
        } else {
          high = character();
        }
        if (high < low) fail_at(dash, "a range whose end is below its start");
        set.add(low, high);
        continue;
      }
      set.add(low, low);
    }
    return negated ? set.complement() : set;
  }

  RegexMatch match_;
  const std::string& field_;
  RegexTree tree_;
};

}  // namespace

RegexTree parse_regex(std::string_view pattern, RegexMatch match, const std::string& field) {
  return Parser(pattern, match, field).parse();
}

}  // namespace headway::serving::guided
