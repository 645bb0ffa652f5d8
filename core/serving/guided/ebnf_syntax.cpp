#include "ebnf_syntax.h"

#include <fmt/format.h>
#include <headway/serving/service_error.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <unordered_map>
#include <utility>

#include "regex_syntax.h"
#include "text_reader.h"
#include "utf8_rules.h"

namespace headway::serving::guided {

namespace {

constexpr int kMaxNesting = 128;  // groups inside groups: the parser's recursion

// Lark's common terminals (lark/grammars/common.lark) as regular expressions: `%import common.X`
// adds X. ESCAPED_STRING is written without Lark's lookbehind: a quote, then characters other
// than a quote, a backslash or a line end, or a backslash and any character but a line end.
struct CommonTerminal {
  const char* name;
  const char* pattern;
};
constexpr CommonTerminal kCommonTerminals[] = {
    {"DIGIT", "[0-9]"},
    {"HEXDIGIT", "[0-9a-fA-F]"},
    {"INT", "[0-9]+"},
    {"SIGNED_INT", "[+-]?[0-9]+"},
    {"DECIMAL", "[0-9]+\\.[0-9]*|\\.[0-9]+"},
    {"FLOAT", "[0-9]+[eE][+-]?[0-9]+|([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?"},
    {"SIGNED_FLOAT", "[+-]?([0-9]+[eE][+-]?[0-9]+|([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?)"},
    {"NUMBER", "[0-9]+[eE][+-]?[0-9]+|([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+"},
    {"SIGNED_NUMBER",
     "[+-]?([0-9]+[eE][+-]?[0-9]+|([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+)"},
    {"ESCAPED_STRING", "\"([^\"\\\\\\n]|\\\\[^\\n])*\""},
    {"LCASE_LETTER", "[a-z]"},
    {"UCASE_LETTER", "[A-Z]"},
    {"LETTER", "[a-zA-Z]"},
    {"WORD", "[a-zA-Z]+"},
    {"CNAME", "[_a-zA-Z][_a-zA-Z0-9]*"},
    {"WS_INLINE", "[ \\t]+"},
    {"WS", "[ \\t\\f\\r\\n]+"},
    {"CR", "\\r"},
    {"LF", "\\n"},
    {"NEWLINE", "(\\r?\\n)+"},
};

// Lark grammars have no `::=` (vLLM tells the two notations apart the same way).
bool is_lark(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    line = line.substr(0, std::min(line.find('#'), line.find("//")));
    if (line.find("::=") != std::string_view::npos) return false;
    at = end + 1;
  }
  return true;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser : TextReader {
 public:
  Parser(std::string_view text, const std::string& field, bool lark)
      : TextReader(text), field_(field), lark_(lark) {}

  EbnfGrammar parse() {
    if (text_.size() > kMaxGrammarBytes) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("{}: the grammar is {} bytes; at most {} are taken", field_,
                                     text_.size(), kMaxGrammarBytes),
                         field_);
    }
    skip_blanks();
    if (!more()) fail("no rules (a grammar needs at least `root ::= ...`, or Lark's `start: ...`)");
    while (more()) {
      if (lark_ && peek() == '%') {
        directive();
      } else {
        definition();
      }
    }
    resolve_references();
    return std::move(grammar_);
  }

 private:
  struct Reference {
    uint32_t expr;
    std::string name;
    size_t at;
  };

  [[noreturn]] void fail(const std::string& what) const { fail_at(at_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    const size_t line_end = text_.rfind('\n', at == 0 ? 0 : at - 1);
    const size_t line_start = at == 0 || line_end == std::string_view::npos ? 0 : line_end + 1;
    throw ServiceError(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: line {}, column {}: {}", field_, line_of(at), at - line_start + 1, what),
        field_);
  }

  // Spaces, tabs, line ends and comments.
  void skip_blanks() {
    while (more()) {
      const char c = peek();
      if (c == '#' || (c == '/' && at_ + 1 < text_.size() && text_[at_ + 1] == '/')) {
        while (more() && peek() != '\n') ++at_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++at_;
      } else {
        return;
      }
    }
  }
  std::string_view name_at(size_t at) const {
    size_t end = at;
    while (end < text_.size() && is_name_char(text_[end])) ++end;
    return text_.substr(at, end - at);
  }
  // Whether a definition (`name ::=`, Lark's `name:`, `?name:` or `NAME.2:`) or a Lark
  // directive (`%import ...`) starts here: the end of the one before. `name_end` is set to where
  // the name (with its Lark priority) ends.
  bool at_definition(size_t* name_end = nullptr) const {
    size_t at = at_;
    if (lark_ && at < text_.size() && text_[at] == '%') return true;
    if (lark_ && at < text_.size() && (text_[at] == '?' || text_[at] == '!')) ++at;
    const std::string_view name = name_at(at);
    if (name.empty()) return false;
    size_t after = at + name.size();
    if (lark_ && after + 1 < text_.size() && text_[after] == '.' && text_[after + 1] >= '0' &&
        text_[after + 1] <= '9') {
      for (++after; after < text_.size() && text_[after] >= '0' && text_[after] <= '9';) ++after;
    }
    if (name_end != nullptr) *name_end = after;
    while (after < text_.size() && (text_[after] == ' ' || text_[after] == '\t')) ++after;
    if (lark_) return text_.substr(after, 1) == ":" && text_.substr(after, 3) != "::=";
    return text_.substr(after, 3) == "::=";
  }

  uint32_t add(EbnfExpr expr) {
    grammar_.exprs.push_back(std::move(expr));
    return static_cast<uint32_t>(grammar_.exprs.size() - 1);
  }
  uint32_t add_list(EbnfKind kind, std::vector<uint32_t> children) {
    if (children.size() == 1) return children[0];
    EbnfExpr expr;
    expr.kind = children.empty() ? EbnfKind::kEmpty : kind;
    expr.children = std::move(children);
    return add(std::move(expr));
  }
  uint32_t add_chars(CodePointSet chars) {
    EbnfExpr expr;
    expr.kind = EbnfKind::kChars;
    expr.chars = std::move(chars);
    return add(std::move(expr));
  }

  void definition() {
    const size_t start = at_;
    // Lark's '?' and '!' (inline, keep tokens) and priorities shape its parse tree or lexer,
    // not the language: they are read and change nothing.
    if (lark_ && (peek() == '?' || peek() == '!')) ++at_;
    const std::string name(name_at(at_));
    if (name.empty()) fail("a rule name (letters, digits, '-' and '_') was expected");
    size_t name_end = at_ + name.size();
    if (!at_definition(&name_end)) {
      fail(fmt::format("'::=' was expected after `{}` (or ':', in a Lark grammar)", name));
    }
    at_ = name_end;
    skip_blanks();
    at_ += lark_ ? 1 : 3;
    const uint32_t index = add_rule(name, start);
    if (!first_rule_) first_rule_ = index;
    skip_blanks();
    const uint32_t body = alternation(0);
    grammar_.rules[index].body = body;
    if (more() && !at_definition()) {
      fail(peek() == ')' ? std::string("an unmatched ')'")
                         : fmt::format("'{}', which the notation does not have here", peek()));
    }
  }

  uint32_t add_rule(const std::string& name, size_t at) {
    if (const auto found = rule_index_.find(name); found != rule_index_.end()) {
      fail_at(at, fmt::format("the rule `{}` is defined again (first on line {})", name,
                              line_of(grammar_.rules[found->second].at)));
    }
    const auto index = static_cast<uint32_t>(grammar_.rules.size());
    rule_index_.emplace(name, index);
    // The line is counted only for a message: counting it for every rule costs the text's
    // length per rule.
    grammar_.rules.push_back(EbnfRule{name, 0, at});
    return index;
  }

  // Lark's `%import common.NAME [-> ALIAS]` and `%import common (A, B)`; the other directives
  // are refused: `%ignore` lets text the rules do not name come between tokens, which a guide
  // would have to write into every rule.
  void directive() {
    const size_t start = at_++;
    const std::string_view word = name_at(at_);
    at_ += word.size();
    if (word != "import") {
      fail_at(start,
              fmt::format("`%{}`, which is not supported (only `%import common.NAME`){}", word,
                          word == "ignore" ? "; write the whitespace into the rules" : ""));
    }
    skip_inline_blanks();
    const std::string_view module = name_at(at_);
    if (module != "common") {
      fail(fmt::format("an import from `{}`: only Lark's `common` terminals are known", module));
    }
    at_ += module.size();
    std::vector<std::pair<std::string, std::string>> names;  // (terminal, name given)
    if (eat('.')) {
      const std::string name(name_at(at_));
      at_ += name.size();
      skip_inline_blanks();
      std::string alias = name;
      if (starts_with("->")) {
        at_ += 2;
        skip_inline_blanks();
        alias = std::string(name_at(at_));
        at_ += alias.size();
      }
      names.emplace_back(name, alias);
    } else {
      skip_inline_blanks();
      if (!eat('(')) fail("`%import common.NAME` or `%import common (NAME, ...)` was expected");
      for (;;) {
        skip_blanks();
        const std::string name(name_at(at_));
        if (name.empty()) fail("a terminal name was expected");
        at_ += name.size();
        names.emplace_back(name, name);
        skip_blanks();
        if (eat(')')) break;
        if (!eat(',')) fail("',' or ')' was expected");
      }
    }
    for (const auto& [name, alias] : names) {
      const CommonTerminal* found = nullptr;
      for (const CommonTerminal& terminal : kCommonTerminals) {
        if (name == terminal.name) found = &terminal;
      }
      if (found == nullptr || alias.empty()) {
        fail_at(start, fmt::format("`common.{}`, which is not one of the common terminals this "
                                   "server knows (DIGIT, INT, NUMBER, SIGNED_NUMBER, WORD, CNAME, "
                                   "ESCAPED_STRING, WS, NEWLINE, ...)",
                                   name));
      }
      const uint32_t index = add_rule(alias, start);
      grammar_.rules[index].body = from_regex(found->pattern, start);
    }
    skip_blanks();
  }

  void skip_inline_blanks() {
    while (more() && (peek() == ' ' || peek() == '\t')) ++at_;
  }

  // A regular expression (Lark's /.../ terminals, the common terminals) as expressions.
  uint32_t from_regex(std::string_view pattern, size_t at) {
    RegexTree tree;
    try {
      tree = parse_regex(pattern, RegexMatch::kWhole, field_);
    } catch (const ServiceError& e) {
      fail_at(at, std::string(e.what()).substr(field_.size() + 2));
    }
    return from_regex_node(tree, tree.root);
  }
  uint32_t from_regex_node(const RegexTree& tree, uint32_t index) {
    const RegexNode& node = tree.nodes[index];
    EbnfExpr expr;
    expr.chars = node.chars;
    expr.min = node.min;
    expr.max = node.max;
    for (const uint32_t child : node.children)
      expr.children.push_back(from_regex_node(tree, child));
    switch (node.kind) {
      case RegexKind::kEmpty:
        expr.kind = EbnfKind::kEmpty;
        break;
      case RegexKind::kChars:
        expr.kind = EbnfKind::kChars;
        break;
      case RegexKind::kConcat:
        expr.kind = EbnfKind::kSequence;
        break;
      case RegexKind::kAlternate:
        expr.kind = EbnfKind::kChoice;
        break;
      case RegexKind::kRepeat:
        expr.kind = EbnfKind::kRepeat;
        break;
    }
    return add(std::move(expr));
  }

  uint32_t line_of(size_t at) const {
    const std::string_view before = text_.substr(0, at);
    return 1 + static_cast<uint32_t>(std::count(before.begin(), before.end(), '\n'));
  }

  uint32_t alternation(int depth) {
    if (depth > kMaxNesting) fail(fmt::format("groups nested deeper than {}", kMaxNesting));
    std::vector<uint32_t> choices{sequence(depth)};
    while (eat('|')) {
      skip_blanks();
      choices.push_back(sequence(depth));
    }
    return add_list(EbnfKind::kChoice, std::move(choices));
  }

  uint32_t sequence(int depth) {
    std::vector<uint32_t> items;
    while (more()) {
      const char c = peek();
      if (c == '|' || c == ')' || (lark_ && c == ']') || at_definition()) break;
      if (lark_ && starts_with("->")) {
        alias();
        continue;
      }
      uint32_t item = primary(depth);
      skip_blanks();
      // A '?' that opens the next Lark definition (`?rule:`) is not a quantifier. Each quantifier
      // nests the item once more, for the compiler's recursion as a group does: `"a"` and 12,000
      // `*` (a client's 12 KB) overflowed its stack (helper-129's fuzzing).
      int nested = depth;
      while (more() &&
             (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{' ||
              (lark_ && peek() == '~')) &&
             !at_definition()) {
        if (++nested > kMaxNesting) {
          fail(fmt::format("groups and quantifiers nested deeper than {}", kMaxNesting));
        }
        item = quantified(item);
        skip_blanks();
      }
      items.push_back(item);
    }
    return add_list(EbnfKind::kSequence, std::move(items));
  }

  // Lark's `-> name` after an alternative names its tree node: read and dropped.
  void alias() {
    at_ += 2;
    skip_inline_blanks();
    const std::string_view name = name_at(at_);
    if (name.empty()) fail("a name after '->' was expected");
    at_ += name.size();
    skip_blanks();
  }

  uint32_t primary(int depth) {
    const size_t start = at_;
    const char c = peek();
    if (c == '"' || (lark_ && c == '\'')) return literal();
    if (lark_ && c == '/') return lark_regex();
    if (lark_ && c == '[') {  // Lark's optional part
      ++at_;
      skip_blanks();
      EbnfExpr optional;
      optional.kind = EbnfKind::kRepeat;
      optional.max = 1;
      optional.children = {alternation(depth + 1)};
      if (!eat(']')) fail_at(start, "an unclosed '['");
      return add(std::move(optional));
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++at_;
      return add_chars(CodePointSet::all());
    }
    if (c == '(') {
      ++at_;
      skip_blanks();
      if (eat('=')) fail_at(start, "a lookahead assertion `(= ...)`, which is not supported");
      const uint32_t inner = alternation(depth + 1);
      if (!eat(')')) fail_at(start, "an unclosed '('");
      return inner;
    }
    const std::string_view name = name_at(at_);
    if (name.empty()) {
      if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier with nothing before it");
      fail(fmt::format("'{}', which the notation does not have here", c));
    }
    at_ += name.size();
    EbnfExpr expr;
    expr.kind = EbnfKind::kRule;
    const uint32_t index = add(std::move(expr));
    references_.push_back(Reference{index, std::string(name), start});
    return index;
  }

  uint32_t quantified(uint32_t item) {
    const size_t start = at_;
    EbnfExpr repeat;
    repeat.kind = EbnfKind::kRepeat;
    repeat.children = {item};
    const char c = peek();
    ++at_;
    if (c == '*') {
      repeat.max = kUnboundedRepeat;
    } else if (c == '+') {
      repeat.min = 1;
      repeat.max = kUnboundedRepeat;
    } else if (c == '?') {
      repeat.max = 1;
    } else if (c == '~') {  // Lark's `item ~ n` and `item ~ n..m`
      skip_inline_blanks();
      repeat.min = count(start);
      repeat.max = repeat.min;
      if (starts_with("..")) {
        at_ += 2;
        repeat.max = count(start);
      }
      if (repeat.max < repeat.min) fail_at(start, "a count whose maximum is below its minimum");
    } else {  // '{'
      skip_blanks();
      repeat.min = count(start);
      skip_blanks();
      repeat.max = repeat.min;
      if (eat(',')) {
        skip_blanks();
        repeat.max = more() && peek() == '}' ? kUnboundedRepeat : count(start);
        skip_blanks();
      }
      if (!eat('}')) fail_at(start, "a count '{...}' that is not {n}, {n,} or {n,m}");
      if (repeat.max < repeat.min) fail_at(start, "a count whose maximum is below its minimum");
    }
    return add(std::move(repeat));
  }

  uint32_t count(size_t start) {
    if (!more() || peek() < '0' || peek() > '9') {
      fail_at(start, lark_ && text_[start] == '~'
                         ? std::string("a count '~' that is not ~ n or ~ n..m")
                         : std::string("a count '{...}' that is not {n}, {n,} or {n,m}"));
    }
    uint32_t value = 0;
    while (more() && peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<uint32_t>(peek() - '0');
      if (value > kMaxRepeat) fail_at(start, fmt::format("a count above {}", kMaxRepeat));
      ++at_;
    }
    return value;
  }

  // A quoted string; in Lark also 'single quoted', "text"i (any case) and "a".."z" (a range).
  uint32_t literal() {
    const size_t start = at_;
    const char quote = text_[at_++];
    std::vector<uint32_t> characters;
    for (;;) {
      if (!more()) fail_at(start, fmt::format("an unclosed '{}'", quote));
      if (eat(quote)) break;
      characters.push_back(character(start));
    }
    if (lark_ && starts_with("..") && at_ + 2 < text_.size() &&
        (text_[at_ + 2] == '"' || text_[at_ + 2] == '\'')) {
      const size_t dash = at_;
      at_ += 2;
      const size_t high_start = at_;
      const char high_quote = text_[at_++];
      if (!more()) fail_at(high_start, fmt::format("an unclosed '{}'", high_quote));
      const uint32_t high = character(high_start);
      if (!eat(high_quote) || characters.size() != 1) {
        fail_at(start, "a range \"a\"..\"z\" whose ends are not one character each");
      }
      if (high < characters[0]) fail_at(dash, "a range whose end comes before its start");
      return add_chars(CodePointSet::range(characters[0], high));
    }
    const bool any_case = lark_ && more() && peek() == 'i' &&
                          (at_ + 1 == text_.size() || !is_name_char(text_[at_ + 1]));
    if (any_case) ++at_;
    std::vector<uint32_t> items;
    for (const uint32_t c : characters) {
      CodePointSet set = CodePointSet::range(c, c);
      if (any_case && c < 0x80 && std::isalpha(static_cast<int>(c)) != 0) {
        set.add(static_cast<uint32_t>(std::tolower(static_cast<int>(c))),
                static_cast<uint32_t>(std::tolower(static_cast<int>(c))));
        set.add(static_cast<uint32_t>(std::toupper(static_cast<int>(c))),
                static_cast<uint32_t>(std::toupper(static_cast<int>(c))));
      }
      items.push_back(add_chars(std::move(set)));
    }
    return add_list(EbnfKind::kSequence, std::move(items));
  }

  // Lark's /regular expression/ (Python's syntax as guided_regex reads it); flags are refused.
  uint32_t lark_regex() {
    const size_t start = at_++;
    std::string pattern;
    for (;;) {
      if (!more() || peek() == '\n') fail_at(start, "an unclosed '/'");
      const char c = text_[at_++];
      if (c == '/') break;
      if (c == '\\' && more() && peek() == '/') {
        pattern += text_[at_++];  // an escaped slash
        continue;
      }
      pattern += c;
      if (c == '\\' && more()) pattern += text_[at_++];
    }
    if (more() && is_name_char(peek()) && peek() != '_') {
      fail(fmt::format("a regular expression flag '{}', which is not supported", peek()));
    }
    return from_regex(pattern, start);
  }

  uint32_t char_class() {
    const size_t start = at_++;
    const bool negated = eat('^');
    CodePointSet set;
    for (;;) {
      if (!more()) fail_at(start, "an unclosed '['");
      if (eat(']')) break;
      const uint32_t low = character(start);
      uint32_t high = low;
      if (more() && peek() == '-' && at_ + 1 < text_.size() && text_[at_ + 1] != ']') {
        const size_t dash = at_++;
        high = character(start);
        if (high < low) fail_at(dash, "a range whose end comes before its start");
      }
      set.add(low, high);
    }
    if (negated) set = set.complement();
    if (set.empty()) fail_at(start, "a class that matches no character");
    return add_chars(std::move(set));
  }

  // One character of a literal or class: UTF-8 or an escape. Raw line ends are refused, as in
  // llama.cpp: they are written \n.
  uint32_t character(size_t opened) {
    const char c = peek();
    if (c == '\n' || c == '\r') fail_at(opened, "a line end before the closing quote or ']'");
    if (lark_ && c == '\\' && at_ + 1 < text_.size() && text_[at_ + 1] == '\'') {
      at_ += 2;
      return '\'';
    }
    if (c != '\\') {
      uint32_t value = 0;
      const size_t length = decode_utf8(text_, at_, value);
      if (length == 0) fail("a byte that is not UTF-8");
      at_ += length;
      return value;
    }
    const size_t at = at_++;
    if (!more()) fail_at(at, "a '\\' at the end");
    const char e = text_[at_++];
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
        return static_cast<uint8_t>(e);
      case 'x':
        return code_point(at, 2);
      case 'u':
        return code_point(at, 4);
      case 'U':
        return code_point(at, 8);
      default:
        fail_at(at, fmt::format("an unknown escape '\\{}'", e));
    }
  }

  uint32_t code_point(size_t at, size_t digits) {
    uint32_t value = 0;
    if (!read_hex(digits, value)) {
      fail_at(at, fmt::format("an escape that needs {} hex digits", digits));
    }
    if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF)) {
      fail_at(at, "an escape that is not a Unicode scalar value (a surrogate, or above U+10FFFF)");
    }
    return value;
  }

  void resolve_references() {
    for (const Reference& reference : references_) {
      const auto found = rule_index_.find(reference.name);
      if (found == rule_index_.end()) {
        fail_at(reference.at, fmt::format("the rule `{}` is used but not defined", reference.name));
      }
      grammar_.exprs[reference.expr].rule = found->second;
    }
    if (lark_) {  // Lark's `start`, or the first rule (as vLLM's conversion reads it)
      const auto start = rule_index_.find("start");
      if (!first_rule_) fail_at(0, "no rules, only imports");
      grammar_.root = start != rule_index_.end() ? start->second : *first_rule_;
      return;
    }
    const auto root = rule_index_.find("root");
    if (root == rule_index_.end()) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         field_ + ": no rule named `root` (the answer is a `root`)", field_);
    }
    grammar_.root = root->second;
  }

  const std::string& field_;
  const bool lark_;
  std::optional<uint32_t> first_rule_;  // the first rule written in the text (not an import)
  EbnfGrammar grammar_;
  std::unordered_map<std::string, uint32_t> rule_index_;
  std::vector<Reference> references_;
};

}  // namespace

EbnfGrammar parse_ebnf(std::string_view text, const std::string& field) {
  return Parser(text, field, is_lark(text)).parse();
}

}  // namespace headway::serving::guided
