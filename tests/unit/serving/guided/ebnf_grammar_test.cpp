// GBNF grammars (ebnf_syntax.h) compiled to the matcher's nodes (ebnf_grammar.cpp): what they
// accept, checked against a reference recognizer on every short string; that the matcher ends
// regular parts anywhere a match does (not greedily); recursion and its limits; and the refusals
// that name the line, column or rule at fault.
#include <gtest/gtest.h>
#include <headway/serving/service_error.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ebnf_syntax.h"
#include "grammar.h"
#include "grammar_matcher.h"
#include "grammar_walk.h"

namespace headway::serving::guided {
namespace {

Grammar compiled(const std::string& text) { return ebnf_grammar(text, "guided_grammar"); }

// Compiling `text` is refused with param "guided_grammar" and a message that has `words`.
void expect_refused(const std::string& text, const std::string& words) {
  try {
    compiled(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "guided_grammar") << text;
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
        << text << "\n  message: " << e.what() << "\n  wanted: " << words;
  }
}

// A recognizer written from the notation's meaning, independent of the matcher, over ASCII text:
// the positions where each expression may end when it starts at `at`, and whether the text from
// `at` on is the start of something it matches.
class Reference {
 public:
  Reference(const EbnfGrammar& grammar, std::string text)
      : grammar_(grammar), text_(std::move(text)) {}

  bool accepts() { return ends(grammar_.rules[grammar_.root].body, 0).count(text_.size()) > 0; }
  // Whether some answer starts with the text (every rule of the grammars here can end).
  bool starts_an_answer() { return runs_off(grammar_.rules[grammar_.root].body, 0); }

 private:
  bool matches_char(const EbnfExpr& e, size_t at) const {
    if (at >= text_.size()) return false;
    const auto c = static_cast<uint8_t>(text_[at]);
    for (const CodePointRange& range : e.chars.ranges()) {
      if (c >= range.low && c <= range.high) return true;
    }
    return false;
  }

  // Whether text[at..] is a prefix of something `index` matches.
  bool runs_off(uint32_t index, size_t at) {
    const auto key = std::make_pair(index, at);
    if (const auto found = runs_off_memo_.find(key); found != runs_off_memo_.end()) {
      return found->second;
    }
    const EbnfExpr& e = grammar_.exprs[index];
    const size_t n = text_.size();
    bool out = false;
    switch (e.kind) {
      case EbnfKind::kEmpty:
        out = at == n;
        break;
      case EbnfKind::kChars:
        out = at == n || (at + 1 == n && matches_char(e, at));
        break;
      case EbnfKind::kRule:
        out = runs_off(grammar_.rules[e.rule].body, at);
        break;
      case EbnfKind::kSequence: {
        std::set<size_t> now{at};  // where the children before the current one may end
        for (const uint32_t child : e.children) {
          std::set<size_t> next;
          for (const size_t from : now) {
            out = out || runs_off(child, from);
            const std::set<size_t> reached = ends(child, from);
            next.insert(reached.begin(), reached.end());
          }
          now = std::move(next);
        }
        out = out || now.count(n) > 0 || (e.children.empty() && at == n);
        break;
      }
      case EbnfKind::kChoice:
        for (const uint32_t child : e.children) out = out || runs_off(child, at);
        break;
      case EbnfKind::kRepeat: {
        std::set<size_t> now{at};
        std::set<size_t> seen{at};
        for (uint32_t count = 0; !now.empty() && !out; ++count) {
          if (now.count(n) > 0) out = true;  // the items so far, then more may come or it ends
          if (count == e.max) break;
          std::set<size_t> next;
          for (const size_t from : now) {
            out = out || runs_off(e.children[0], from);
            for (const size_t end : ends(e.children[0], from)) {
              if (seen.insert(end).second || count < e.min) next.insert(end);
            }
          }
          now = std::move(next);
        }
        break;
      }
    }
    runs_off_memo_[key] = out;
    return out;
  }

  std::set<size_t> ends(uint32_t index, size_t at) {
    const auto key = std::make_pair(index, at);
    if (const auto found = memo_.find(key); found != memo_.end()) return found->second;
    const EbnfExpr& e = grammar_.exprs[index];
    std::set<size_t> out;
    switch (e.kind) {
      case EbnfKind::kEmpty:
        out.insert(at);
        break;
      case EbnfKind::kChars:
        if (matches_char(e, at)) out.insert(at + 1);
        break;
      case EbnfKind::kRule:
        out = ends(grammar_.rules[e.rule].body, at);
        break;
      case EbnfKind::kSequence: {
        std::set<size_t> now{at};
        for (const uint32_t child : e.children) {
          std::set<size_t> next;
          for (const size_t from : now) {
            const std::set<size_t> reached = ends(child, from);
            next.insert(reached.begin(), reached.end());
          }
          now = std::move(next);
        }
        out = std::move(now);
        break;
      }
      case EbnfKind::kChoice:
        for (const uint32_t child : e.children) {
          const std::set<size_t> reached = ends(child, at);
          out.insert(reached.begin(), reached.end());
        }
        break;
      case EbnfKind::kRepeat: {
        std::set<size_t> now{at};
        std::set<size_t> seen;
        for (uint32_t count = 0;; ++count) {
          if (count >= e.min) out.insert(now.begin(), now.end());
          if (count == e.max || now.empty()) break;
          std::set<size_t> next;
          for (const size_t from : now) {
            const std::set<size_t> reached = ends(e.children[0], from);
            next.insert(reached.begin(), reached.end());
          }
          // Past the minimum, positions already reached add nothing new.
          if (count >= e.min) {
            for (auto it = next.begin(); it != next.end();) {
              it = seen.count(*it) > 0 ? next.erase(it) : std::next(it);
            }
          }
          seen.insert(next.begin(), next.end());
          now = std::move(next);
        }
        break;
      }
    }
    memo_[key] = out;
    return out;
  }

  const EbnfGrammar& grammar_;
  std::string text_;
  std::map<std::pair<uint32_t, size_t>, std::set<size_t>> memo_;
  std::map<std::pair<uint32_t, size_t>, bool> runs_off_memo_;
};

struct Case {
  const char* grammar;
  const char* alphabet;
  size_t longest;
};

// Regular and recursive grammars, ambiguous ones, optional and counted parts, parts that end
// where the next may begin.
const Case kCases[] = {
    {R"g(root ::= [a-c]* "a")g", "abc", 6},
    {R"g(root ::= "(" root ")" | "x")g", "()x", 9},
    {R"g(root ::= item ("," item)*
        item ::= "a" | "(" root ")")g",
     "a,()", 8},
    {R"g(root ::= word (" " word)* "."?
        word ::= [a-b]+ | "<" root ">")g",
     "ab <>.", 7},
    {R"g(root ::= (x | y){1,3} x
        x ::= "a" | "ab"
        y ::= "b" root?)g",
     "ab", 8},
    {R"g(root ::= expr
        expr ::= term (("+" | "-") term)*
        term ::= factor ("*" factor)*
        factor ::= [0-9] | "(" expr ")")g",
     "1+*()", 8},
    {R"g(root ::= a? b? "c"
        a ::= "a" root?
        b ::= "b"+)g",
     "abc", 8},
    {R"g(root ::= "" | "a" root "b")g", "ab", 10},
    {R"g(root ::= "(" root ")" root | [ab] "c"?)g", "()abc", 8},
    {R"g(root ::= (s | [ab]){2,4}
        s ::= "[" root? "]")g",
     "ab[]", 8},
};

// On every string over the alphabet up to the length, the matcher completes exactly the
// reference's answers, and keeps open exactly the starts of answers: a byte is refused as soon
// as no answer can follow it, never later, and never sooner.
TEST(EbnfGrammar, AcceptsExactlyWhatTheReferenceDoesOnEveryShortString) {
  for (const Case& c : kCases) {
    const Grammar grammar = compiled(c.grammar);
    const EbnfGrammar parsed = parse_ebnf(c.grammar, "guided_grammar");
    const std::string alphabet = c.alphabet;
    size_t complete = 0;
    size_t open = 0;
    std::vector<std::string> layer{""};
    for (size_t length = 0; length <= c.longest; ++length) {
      std::vector<std::string> next;
      for (const std::string& text : layer) {
        const std::string at = walk(grammar, text);
        Reference reference(parsed, text);
        const bool answer = reference.accepts();
        ASSERT_EQ(at == "complete", answer) << c.grammar << "\n  text: '" << text << "'";
        ASSERT_EQ(at != "dead", reference.starts_an_answer())
            << c.grammar << "\n  text: '" << text << "'";
        complete += answer ? 1 : 0;
        open += at == "open" ? 1 : 0;
        if (at == "dead" || length == c.longest) continue;
        for (const char ch : alphabet) next.push_back(text + ch);
      }
      layer = std::move(next);
    }
    EXPECT_GT(complete, 2u) << c.grammar;
    EXPECT_GT(open, 2u) << c.grammar;
  }
}

TEST(EbnfGrammar, ARegularPartEndsAnywhereAMatchDoesNotOnlyWhereItMust) {
  // `word "a"` is one automaton; a greedy one would take the 'a' that `tail` needs and never end.
  const Grammar g = compiled(R"g(root ::= word "a" tail
                                 word ::= [a-z]*
                                 tail ::= "a!" | "(" tail ")")g");
  EXPECT_EQ(walk(g, "banaa!"), "complete");
  EXPECT_EQ(walk(g, "aa!"), "complete");
  EXPECT_EQ(walk(g, "ba(a!)"), "complete");
  EXPECT_EQ(walk(g, "bana!"), "dead");
  EXPECT_EQ(walk(g, "banaaa"), "open");
}

TEST(EbnfGrammar, RegularRulesBecomeOneAutomaton) {
  // Inlined: the whole answer is one automaton (the vocabulary walk's fast path).
  const Grammar regular = compiled(R"g(root ::= greeting (", " name)* "!"
                                       greeting ::= "hello" | "hi"
                                       name ::= [A-Z] [a-z]+)g");
  EXPECT_EQ(regular.nodes[regular.root].kind, NodeKind::kRegex);
  EXPECT_EQ(regular.patterns.size(), 1u);
  EXPECT_EQ(walk(regular, "hi, Ann, Bo!"), "complete");
  EXPECT_EQ(walk(regular, "hello, ann"), "dead");
  // Recursion keeps nodes, with the regular runs between them as automata.
  const Grammar recursive = compiled(R"g(root ::= "<" name ">" root? "</" name ">"
                                         name ::= [a-z]+)g");
  EXPECT_EQ(recursive.nodes[recursive.root].kind, NodeKind::kSequence);
  EXPECT_EQ(walk(recursive, "<a><bc></bc></a>"), "complete");
  EXPECT_EQ(walk(recursive, "<a></b>"), "complete");  // the grammar does not tie names together
  EXPECT_EQ(walk(recursive, "<a></>"), "dead");
}

TEST(EbnfGrammar, RightRecursionKeepsAFlatStackAndNestingIsBounded) {
  const Grammar list = compiled(R"g(root ::= item ("," root)?
                                    item ::= [0-9]+)g");
  std::string text;
  for (int i = 0; i < 5000; ++i) text += (i == 0 ? "" : ",") + std::to_string(i);
  EXPECT_EQ(walk(list, text), "complete");  // 5,000 levels, past kMaxStackFrames without tails

  const Grammar nested = compiled(R"g(root ::= "(" root ")" | "x")g");
  const std::string deep(200, '(');
  EXPECT_EQ(walk(nested, deep + "x" + std::string(200, ')')), "complete");
  EXPECT_EQ(walk(nested, std::string(kMaxStackFrames + 1, '(')), "dead");
}

// A chain of rules each using the next is regular: short, it is inlined into one automaton;
// past the inlining depth it is matched as nodes, compiled without recursion either way.
TEST(EbnfGrammar, LongChainsOfRulesAreMatchedAsNodesPastTheInliningDepth) {
  const auto chain = [](int rules) {
    std::string text = "root ::= r0\n";
    for (int i = 0; i < rules; ++i) {
      text += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + " | \"b\"\n";
    }
    return text + "r" + std::to_string(rules) + " ::= \"c\"\n";
  };
  const Grammar short_chain = compiled(chain(10));
  EXPECT_EQ(short_chain.nodes[short_chain.root].kind, NodeKind::kRegex);
  EXPECT_EQ(walk(short_chain, std::string(10, 'a') + "c"), "complete");
  EXPECT_EQ(walk(short_chain, std::string(11, 'a')), "dead");

  const Grammar long_chain = compiled(chain(2000));
  EXPECT_NE(long_chain.nodes[long_chain.root].kind, NodeKind::kRegex);
  EXPECT_EQ(walk(long_chain, std::string(1999, 'a') + "b"), "complete");
  EXPECT_EQ(walk(long_chain, std::string(2000, 'a') + "c"), "complete");
  EXPECT_EQ(walk(long_chain, std::string(2000, 'a') + "b"), "dead");
  EXPECT_EQ(walk(long_chain, std::string(1000, 'a')), "open");
}

// Found by review: a byte that closes many nested frames, each opening a choice, was cut off at
// the matcher's old recursion bound (64); and equal parse stacks counted against the bound on
// different ones before they were merged.
TEST(EbnfGrammar, LongChainsOfClosesAndManyEqualParsesAreFollowed) {
  const Grammar closes = compiled(R"g(root ::= inner "y"
                                      inner ::= "x" inner a | ""
                                      a ::= "q" inner | "")g");
  EXPECT_EQ(walk(closes, std::string(64, 'x') + "y"), "complete");
  EXPECT_EQ(walk(closes, std::string(300, 'x') + "y"), "complete");
  EXPECT_EQ(walk(closes, std::string(300, 'x') + "qxy"), "complete");

  const Grammar equal = compiled(R"g(root ::= s "c" | "a"* "e"
                                     s ::= "a" s s | "")g");
  EXPECT_EQ(walk(equal, std::string(40, 'a') + "e"), "complete");
  EXPECT_EQ(walk(equal, std::string(40, 'a') + "c"), "complete");
}

// Found by review: a rule that doubles its size at each level (`d0 ::= d1 d1`, ... 21 levels:
// 2^20 "b"s) was built as an automaton before it was found too large, once per use: minutes of
// compiling. Parts are sized first now, and nothing past the bounds is built.
TEST(EbnfGrammar, PartsTooLargeForAnAutomatonAreSizedNotBuilt) {
  std::string text = "root ::= x0";
  for (int j = 1; j < 100; ++j) text += " | x" + std::to_string(j);
  text += "\n";
  for (int j = 0; j < 100; ++j) text += "x" + std::to_string(j) + " ::= d0 \"c\"\n";
  for (int i = 0; i < 20; ++i) {
    text += "d" + std::to_string(i) + " ::= d" + std::to_string(i + 1) + " d" +
            std::to_string(i + 1) + "\n";
  }
  text += "d20 ::= \"b\"\n";
  const Grammar g = compiled(text);
  EXPECT_EQ(walk(g, std::string(4096, 'b')), "open");
  EXPECT_EQ(walk(g, "bc"), "dead");
}

TEST(EbnfGrammar, NotationCommentsEscapesAndLines) {
  // Alternatives over several lines, comments, escapes, '.', negated classes, counts.
  const Grammar g = compiled(
      "# a comment\n"
      "root ::= line+   # lines\n"
      "line ::= \"\\x41\" tab [^\\n\\t]{0,3} \"\\n\"\n"
      "       | \"\\u00e9\" . \"\\n\"\n"
      "       | \"\\\"q\\\"\" [\\]\\[-] \"\\n\"\n"
      "tab ::= \"\\t\"\n");
  EXPECT_EQ(walk(g, "A\tabc\n"), "complete");
  EXPECT_EQ(walk(g, "A\tabcd\n"), "dead");
  EXPECT_EQ(walk(g, "\xC3\xA9\xE2\x82\xAC\n"), "complete");  // é then any character (€)
  EXPECT_EQ(walk(g, "\"q\"]\n\"q\"-\nA\t\n"), "complete");
  EXPECT_EQ(walk(g, "\"q\"x\n"), "dead");
}

TEST(EbnfGrammar, RefusalsNameTheLineColumnOrRule) {
  expect_refused("", "no rules");
  expect_refused("item ::= \"a\"", "no rule named `root`");
  expect_refused("root ::= item", "line 1, column 10: the rule `item` is used but not defined");
  expect_refused("root ::= \"a\"\nroot ::= \"b\"",
                 "line 2, column 1: the rule `root` is defined "
                 "again (first on line 1)");
  expect_refused("root ::= \"abc", "line 1, column 10: an unclosed '\"'");
  expect_refused("root ::= [a-", "an unclosed '['");
  expect_refused("root ::= [z-a]", "a range whose end comes before its start");
  expect_refused("root ::= (\"a\"", "an unclosed '('");
  expect_refused("root ::= \"a\")", "an unmatched ')'");
  expect_refused("root ::= \"a\"{3,2}", "maximum is below its minimum");
  expect_refused("root ::= \"a\"{2000}", "a count above 1000");
  expect_refused("root ::= * \"a\"", "a quantifier with nothing before it");
  // Each quantifier nests its item once more: 12,000 of them (a client's 12 KB) overflowed the
  // compiler's stack. Groups and quantifiers share the parser's bound.
  expect_refused("root ::= \"a\"" + std::string(12000, '*'),
                 "groups and quantifiers nested deeper than 128");
  EXPECT_NO_THROW(compiled("root ::= \"a\"*?+"));
  expect_refused("root ::= (= \"a\") \"a\"", "lookahead");
  expect_refused("root ::= \"\\q\"", "an unknown escape '\\q'");
  expect_refused("root ::= \"\\uD800\"", "surrogate");
  expect_refused("root ::= \"a\" ; \"b\"", "';', which the notation does not have here");
  expect_refused("root =  \"a\"", "'::=' was expected after `root`");
  // Grammars the matcher could not follow.
  expect_refused("root ::= root \"a\" | \"b\"",
                 "guided_grammar (rule `root`): can reach itself "
                 "before it reads a character (left recursion");
  expect_refused("root ::= a\na ::= b? \"x\" | \"y\"\nb ::= a \"z\"", "left recursion");
  expect_refused("root ::= \"<\" a* \">\"\na ::= \"(\" root \")\" | \"\"",
                 "guided_grammar (rule `root`): repeats a part that may match the empty text");
  expect_refused("root ::= \"a\" loop | \"b\"\nloop ::= \"x\" loop",
                 "guided_grammar (rule `loop`): never ends");
}

// Lark grammars (no `::=`), as vLLM takes them for guided_grammar: `start` or the first rule is
// the answer; '?' and '!' rules, priorities and `-> alias` change nothing of the language.
TEST(EbnfGrammar, LarkGrammarsAreReadAsVllmTakesThem) {
  // vLLM's documented example.
  const Grammar sql = compiled(R"g(
      ?start: select_statement
      ?select_statement: "SELECT " column " from " table " where " condition
      ?column: "col_1" | "col_2"
      ?table: "table_1" | "table_2"
      ?condition: column "=" number
      number: "1" | "2")g");
  EXPECT_EQ(walk(sql, "SELECT col_1 from table_2 where col_2=1"), "complete");
  EXPECT_EQ(walk(sql, "SELECT col_3"), "dead");
  EXPECT_EQ(walk(sql, "SELECT  from"), "dead");  // `?column:` is a definition, not `table?`
  EXPECT_EQ(walk(sql, "SELECT col_1 from table_1 where col_1=1"), "complete");

  // Lark's JSON example (without %ignore): [optional], aliases, common terminals.
  const Grammar json = compiled(R"g(
      ?start: value
      ?value: object
            | array
            | string
            | SIGNED_NUMBER      -> number
            | "true"             -> true
            | "false"            -> false
            | "null"             -> null
      array  : "[" [value ("," value)*] "]"
      object : "{" [pair ("," pair)*] "}"
      pair   : string ":" value
      string : ESCAPED_STRING
      %import common.ESCAPED_STRING
      %import common.SIGNED_NUMBER)g");
  EXPECT_EQ(walk(json, R"({"a":[1,-2.5e3,true,null],"b\"":{},"c":[]})"), "complete");
  EXPECT_EQ(walk(json, R"({"a":[1,])"), "dead");
  EXPECT_EQ(walk(json, R"({"a": 1})"), "dead");  // no %ignore: no free whitespace

  // Regular expression terminals, 'single quotes', ranges, any-case strings, ~ counts, comments.
  const Grammar misc = compiled(R"g(
      // an assignment
      start: NAME '=' VALUE ";" KEYWORD ~ 1..2   # trailing comment
      NAME.2: /[a-z_][a-z0-9_]*/
      VALUE: ("0".."9")+ | /"[^"]*"/
      KEYWORD: "end"i)g");
  EXPECT_EQ(walk(misc, "x_1=42;END"), "complete");
  EXPECT_EQ(walk(misc, "x=\"a b\";endEnD"), "complete");
  EXPECT_EQ(walk(misc, "x=4;endendend"), "dead");
  EXPECT_EQ(walk(misc, "1x=4;end"), "dead");
  // The first rule is the answer where there is no `start`.
  EXPECT_EQ(walk(compiled("greeting: \"hi\" | \"yo\"\nother: \"x\""), "yo"), "complete");
}

TEST(EbnfGrammar, LarkRefusalsNameTheLineAndWhatIsNotSupported) {
  expect_refused("start: WS \"a\"\n%import common.WS\n%ignore WS",
                 "line 3, column 1: `%ignore`, which is not supported");
  expect_refused("start: X\n%import common.NOPE", "`common.NOPE`, which is not one of");
  expect_refused("start: X\n%import lark.X", "only Lark's `common` terminals are known");
  expect_refused("start: /ab/i", "a regular expression flag 'i'");
  expect_refused("start: \"a\"\nrest: /(a)\\1/",
                 "line 2, column 7: the regular expression has a backreference");
  expect_refused("start: value", "line 1, column 8: the rule `value` is used but not defined");
  expect_refused("start: [\"a\"", "an unclosed '['");
  expect_refused("start: \"ab\"..\"z\"", "whose ends are not one character each");
  expect_refused("start: \"a\" ~ x", "a count '~' that is not ~ n or ~ n..m");
}

}  // namespace
}  // namespace headway::serving::guided
