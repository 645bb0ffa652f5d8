// Regular expressions compiled to byte automata (regex_syntax.h, byte_dfa.h): what they match,
// checked against std::regex on the syntax both read; that a byte is refused as soon as no match
// can follow it; UTF-8; JSON-string mode; and the refusals that name what is wrong and where.
#include <gtest/gtest.h>
#include <headway/serving/service_error.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "byte_dfa.h"
#include "code_point_set.h"

namespace headway::serving::guided {
namespace {

ByteDfa whole(const std::string& pattern, bool json_string = false) {
  return compile_regex(pattern, RegexMatch::kWhole, json_string, "guided_regex");
}

bool accepts(const ByteDfa& dfa, std::string_view text) {
  uint32_t state = dfa.start();
  for (const char byte : text) {
    state = dfa.next(state, static_cast<uint8_t>(byte));
    if (state == ByteDfa::kDead) return false;
  }
  return dfa.accepting(state);
}

// Compiling `pattern` (whole) is refused with param "guided_regex" and a message that has
// `words`.
void expect_refused(const std::string& pattern, const std::string& words);

// The bytes that may follow `state`.
std::vector<uint8_t> bytes_after(const ByteDfa& dfa, uint32_t state) {
  std::vector<uint8_t> out;
  for (int byte = 0; byte < 256; ++byte) {
    if (dfa.next(state, static_cast<uint8_t>(byte)) != ByteDfa::kDead) {
      out.push_back(static_cast<uint8_t>(byte));
    }
  }
  return out;
}

// Patterns in the syntax std::regex (ECMAScript) reads the same way, with the bytes their
// strings are drawn from.
struct Case {
  const char* pattern;
  const char* alphabet;
};
const Case kCases[] = {
    {"abc", "abc"},
    {"a|bc|", "abc"},
    {"(ab)*c?", "abc"},
    {"a+b*a?", "ab"},
    {"[a-c]{2,3}x", "abcdx"},
    {"[^a-c]{2}", "abcd-"},
    {"(a|b){3}", "ab"},
    {"x{2,}", "x"},
    {"(?:ab|a)(?:bc|c)", "abc"},
    {"\\d+(\\.\\d{1,2})?", "0123.x"},
    {"\\w+@\\w+\\.com", "ab_@.com9"},
    {"[\\s\\d]+-\\S", "1 \t-x"},
    {"a.c", "abc\n."},
    {"(0|[1-9][0-9]*)(e[+-]?[0-9]+)?", "0123e+-"},
    {"[-a]+[a-]+", "a-b"},
    {"\\(\\)\\[\\]\\{\\}\\*\\+\\?\\.\\|\\^\\$\\\\", "()[]{}*+?.|^$\\"},
    {"(a|ab)(c|bcd)(d*)", "abcd"},
    {"((a|b)c|d){1,3}", "abcd"},
};

TEST(Regex, AcceptsExactlyWhatStdRegexMatches) {
  std::mt19937 random(11);
  for (const Case& c : kCases) {
    const ByteDfa dfa = whole(c.pattern);
    const std::regex reference(c.pattern, std::regex::ECMAScript);
    const std::string alphabet = c.alphabet;
    for (int i = 0; i < 3000; ++i) {
      std::string text;
      const size_t length = random() % 9;
      for (size_t k = 0; k < length; ++k) text.push_back(alphabet[random() % alphabet.size()]);
      const bool expected = std::regex_match(text, reference);
      ASSERT_EQ(accepts(dfa, text), expected) << c.pattern << " on '" << text << "'";
    }
    // Every string a walk of the automaton writes is a match: a byte is allowed only where a
    // match can still follow, so a walk never gets stuck before an accepting state.
    for (int i = 0; i < 200; ++i) {
      uint32_t state = dfa.start();
      std::string text;
      for (;;) {
        const std::vector<uint8_t> allowed = bytes_after(dfa, state);
        if (dfa.accepting(state) && (allowed.empty() || random() % 3 == 0)) break;
        ASSERT_FALSE(allowed.empty()) << c.pattern << " stuck after '" << text << "'";
        const uint8_t byte = allowed[random() % allowed.size()];
        state = dfa.next(state, byte);
        text.push_back(static_cast<char>(byte));
        ASSERT_LT(text.size(), 5000u) << c.pattern;
      }
      // std::regex reads bytes, so only ASCII walks can be checked against it.
      bool ascii = true;
      for (const char byte : text) ascii = ascii && static_cast<uint8_t>(byte) < 0x80;
      if (ascii) {
        EXPECT_TRUE(std::regex_match(text, reference)) << c.pattern << " wrote '" << text << "'";
      }
    }
  }
}

// An answer must hold in Python (guided_regex) and in JavaScript (JSON Schema's pattern), so the
// class escapes and '.' match only what both engines agree they match.
TEST(Regex, ClassEscapesMatchWhatPythonAndJavaScriptAgreeOn) {
  const ByteDfa not_space = whole("\\S");
  EXPECT_TRUE(accepts(not_space, "é"));
  EXPECT_TRUE(accepts(not_space, "x"));
  EXPECT_FALSE(accepts(not_space, "\xC2\xA0"));      // U+00A0, a space to both
  EXPECT_FALSE(accepts(not_space, "\xE2\x80\x83"));  // U+2003
  EXPECT_FALSE(accepts(not_space, "\x1F"));          // a space to Python
  const ByteDfa not_word = whole("\\W");
  EXPECT_TRUE(accepts(not_word, "-"));
  EXPECT_FALSE(accepts(not_word, "é"));  // a word character to Python
  EXPECT_FALSE(accepts(not_word, "_"));
  const ByteDfa not_digit = whole("\\D");
  EXPECT_TRUE(accepts(not_digit, "x"));
  EXPECT_FALSE(accepts(not_digit, "\xD9\xA3"));  // U+0663, a digit to Python
  const ByteDfa any = whole(".");
  EXPECT_TRUE(accepts(any, "é"));
  for (const char* terminator : {"\n", "\r", "\xE2\x80\xA8", "\xE2\x80\xA9"}) {
    EXPECT_FALSE(accepts(any, terminator)) << terminator;  // a line's end to JavaScript
  }
  // A surrogate pair written as two escapes is one character, as JavaScript writes them.
  EXPECT_TRUE(accepts(whole("\\ud83d\\ude00"), "😀"));
  expect_refused("\\ud83d", "a lone surrogate escape");
  expect_refused("\\ud83dx", "a lone surrogate escape");
  expect_refused("\\ud83d\\u0041", "a high surrogate without its low half");
  // What the two engines read differently is refused.
  expect_refused("\\012", "an octal escape");
  expect_refused("a{,2}", "a count without a minimum");
  expect_refused("a{,}", "a count without a minimum");
  EXPECT_TRUE(accepts(whole("\\0"), std::string(1, '\0')));
}

TEST(Regex, SearchPatternsMatchAnywhereUnlessPinned) {
  const auto search = [](const char* pattern) {
    return compile_regex(pattern, RegexMatch::kSearch, true, "guided_json.pattern");
  };
  const ByteDfa anywhere = search("ab+");
  EXPECT_TRUE(accepts(anywhere, "xxabbby"));
  EXPECT_TRUE(accepts(anywhere, "ab"));
  EXPECT_FALSE(accepts(anywhere, "xa"));
  const ByteDfa pinned = search("^ab+$");
  EXPECT_TRUE(accepts(pinned, "abb"));
  EXPECT_FALSE(accepts(pinned, "xab"));
  EXPECT_FALSE(accepts(pinned, "abx"));
  const ByteDfa start_only = search("^[0-9]");
  EXPECT_TRUE(accepts(start_only, "7 dwarfs"));
  EXPECT_FALSE(accepts(start_only, "a7"));
  // Each top-level alternative is pinned on its own.
  const ByteDfa either = search("^a$|b");
  EXPECT_TRUE(accepts(either, "a"));
  EXPECT_FALSE(accepts(either, "aa"));
  EXPECT_TRUE(accepts(either, "abc"));
  // A whole match ignores the anchors.
  EXPECT_TRUE(accepts(whole("^ab$"), "ab"));
}

TEST(Regex, CharactersAreUtf8AndNeverHalfOfOne) {
  const ByteDfa greek = whole("[α-ω]+");
  EXPECT_FALSE(accepts(greek, "λόγος"));  // ό (U+03CC) is past ω (U+03C9)
  EXPECT_TRUE(accepts(greek, "λογος"));
  EXPECT_FALSE(accepts(greek, "\xCE"));  // half of a character
  const ByteDfa dot = whole("a.b");
  EXPECT_TRUE(accepts(dot, "aéb"));
  EXPECT_TRUE(accepts(dot, "a€b"));
  EXPECT_TRUE(accepts(dot, "a😀b"));
  EXPECT_FALSE(accepts(dot, "a\nb"));
  EXPECT_FALSE(accepts(dot,
                       "a\xED\xA0\x80"
                       "b"));  // a surrogate's bytes are no character
  EXPECT_FALSE(accepts(dot,
                       "a\xC0\xAF"
                       "b"));  // overlong
  const ByteDfa not_a = whole("[^a]");
  EXPECT_TRUE(accepts(not_a, "é"));
  EXPECT_TRUE(accepts(not_a, "\n"));
  EXPECT_FALSE(accepts(not_a, "a"));
  EXPECT_TRUE(accepts(whole("\\u00e9\\x41"), "éA"));
  EXPECT_TRUE(accepts(whole("日本+"), "日本本"));
}

// Every code point's encoding fits the sequences of a set exactly when it is in the set.
TEST(Regex, Utf8SequencesCoverASetAndNothingElse) {
  CodePointSet set;
  set.add(0x41, 0x5A);
  set.add(0x7F, 0x81);
  set.add(0x7FE, 0x801);
  set.add(0xD000, 0xE100);  // spans the surrogates, which are left out
  set.add(0xFFFE, 0x10002);
  set.add(0x10FFF0, kMaxCodePoint);
  const std::vector<Utf8Sequence> sequences = utf8_sequences(set);
  const auto inside = [&](uint32_t c) {
    for (const CodePointRange& r : set.ranges()) {
      if (c >= r.low && c <= r.high) return true;
    }
    return false;
  };
  std::string text;
  for (uint32_t c = 0; c <= kMaxCodePoint; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) {
      ASSERT_FALSE(inside(c));
      continue;
    }
    uint8_t bytes[4];
    uint8_t length = 0;
    if (c < 0x80) {
      bytes[length++] = static_cast<uint8_t>(c);
    } else if (c < 0x800) {
      bytes[length++] = static_cast<uint8_t>(0xC0 | c >> 6);
      bytes[length++] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      bytes[length++] = static_cast<uint8_t>(0xE0 | c >> 12);
      bytes[length++] = static_cast<uint8_t>(0x80 | (c >> 6 & 0x3F));
      bytes[length++] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    } else {
      bytes[length++] = static_cast<uint8_t>(0xF0 | c >> 18);
      bytes[length++] = static_cast<uint8_t>(0x80 | (c >> 12 & 0x3F));
      bytes[length++] = static_cast<uint8_t>(0x80 | (c >> 6 & 0x3F));
      bytes[length++] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    }
    int fits = 0;
    for (const Utf8Sequence& s : sequences) {
      bool all = s.length == length;
      for (uint8_t i = 0; all && i < length; ++i)
        all = bytes[i] >= s.low[i] && bytes[i] <= s.high[i];
      fits += all ? 1 : 0;
    }
    ASSERT_EQ(fits, inside(c) ? 1 : 0) << std::hex << "U+" << c;
  }
  EXPECT_EQ(set.complement().complement().ranges(), set.ranges());
}

TEST(Regex, InAJsonStringQuotesBackslashesAndControlsNeverCome) {
  const ByteDfa dfa = whole("[a\"\\\\\n]+", true);
  EXPECT_TRUE(accepts(dfa, "aaa"));
  EXPECT_FALSE(accepts(dfa, "a\""));
  EXPECT_FALSE(accepts(dfa, "a\\"));
  EXPECT_FALSE(accepts(dfa, "a\n"));
  // A byte that leads only to a quote is refused itself: a string cannot be left stuck after it.
  const ByteDfa quote_after_a = whole("a\"|b", true);
  EXPECT_EQ(quote_after_a.next(quote_after_a.start(), 'a'), ByteDfa::kDead);
  EXPECT_NE(quote_after_a.next(quote_after_a.start(), 'b'), ByteDfa::kDead);
  try {
    whole("a\"b", true);
    ADD_FAILURE() << "a pattern that needs a quote was accepted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "guided_regex");
    EXPECT_NE(std::string(e.what()).find("matches no string that a JSON string holds"),
              std::string::npos)
        << e.what();
  }
}

TEST(Regex, LengthsAndSecondPatternsFoldIn) {
  const ByteDfa both = with_length(whole("[0-9]+"), 2, 3, "x");
  EXPECT_FALSE(accepts(both, "1"));
  EXPECT_TRUE(accepts(both, "12"));
  EXPECT_TRUE(accepts(both, "123"));
  EXPECT_FALSE(accepts(both, "1234"));
  EXPECT_FALSE(accepts(both, "1a"));
  // After three digits nothing may follow: no fourth byte, not even one a match could take.
  uint32_t state = both.start();
  for (const char byte : std::string("123")) state = both.next(state, static_cast<uint8_t>(byte));
  EXPECT_TRUE(bytes_after(both, state).empty());
  // Lengths count characters, not bytes.
  const ByteDfa letters = with_length(whole(".+"), 2, 2, "x");
  EXPECT_TRUE(accepts(letters, "é€"));
  EXPECT_FALSE(accepts(letters, "é€a"));
  // Only a minimum: any length from it on.
  const ByteDfa long_enough = with_length(whole("a*"), 3, kUnboundedRepeat, "x");
  EXPECT_FALSE(accepts(long_enough, "aa"));
  EXPECT_TRUE(accepts(long_enough, std::string(50, 'a')));
  // A byte after which the length can no longer be met is refused itself.
  const ByteDfa three = with_length(whole("[0-9]{3}|a"), 0, 2, "x");
  EXPECT_EQ(three.next(three.start(), '1'), ByteDfa::kDead);
  EXPECT_TRUE(accepts(three, "a"));
  EXPECT_THROW(with_length(whole("a{5}"), 0, 3, "x"), ServiceError);
  // Two patterns: the strings both accept.
  const ByteDfa ones = intersect(whole("[0-9]+"), whole("1.*"), "x");
  EXPECT_TRUE(accepts(ones, "123"));
  EXPECT_FALSE(accepts(ones, "23"));
  EXPECT_FALSE(accepts(ones, "1a"));
  EXPECT_THROW(intersect(whole("[0-9]+"), whole("[a-z]+"), "x"), ServiceError);
}

void expect_refused(const std::string& pattern, const std::string& words) {
  try {
    whole(pattern);
    ADD_FAILURE() << "accepted: " << pattern;
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "guided_regex");
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << pattern << ": " << e.what();
  }
}

TEST(Regex, WhatNoAutomatonCanFollowIsRefusedNamingIt) {
  expect_refused("(a)\\1", "a backreference at character 3");
  expect_refused("(?=a)b", "a lookaround (they describe no set of strings");
  expect_refused("(?<!a)b", "a lookaround");
  expect_refused("a\\bb", "word boundary");
  expect_refused("(?i)abc", "inline flag");
  expect_refused("a++", "possessive");
  expect_refused("a**", "a quantifier on a quantifier");
  expect_refused("*a", "nothing to repeat at character 0");
  expect_refused("a{3,2}", "maximum is below its minimum");
  expect_refused("a{1001}", "a count above 1000");
  expect_refused("(ab", "an unclosed '(' at character 0");
  expect_refused("ab)", "an unmatched ')' at character 2");
  expect_refused("[ab", "an unclosed '['");
  expect_refused("[z-a]", "a range whose end is below its start");
  expect_refused("[[:alpha:]]", "POSIX class");
  expect_refused("a^b", "'^' inside the pattern");
  expect_refused("a$b", "'$' inside the pattern");
  expect_refused("\\q", "an unknown escape '\\q'");
  expect_refused("ab\\", "a '\\' at the end");
  expect_refused("a\xFF", "a byte that is not UTF-8");
  // Every character, astral ones written as surrogate pairs: its complement is empty.
  expect_refused("[^\\x00-\\uffff\\ud800\\udc00-\\udbff\\udfff]", "matches no string");
  // Too large: the subset construction's states, and Thompson's for large counts.
  expect_refused("(a|b)*a(a|b){20}", "more than 65536 automaton states");
  expect_refused("((a{1000}){1000}){1000}", "too large");
  // Many NFA states in each DFA state: refused by the construction's budget, quickly.
  expect_refused("(\\w+\\s*){1000}", "too costly to compile");
  // '{' that opens no count is a literal, as in Python.
  EXPECT_TRUE(accepts(whole("a{b}"), "a{b}"));
  EXPECT_TRUE(accepts(whole("(?P<year>[0-9]{4})-(?<month>[0-9]{2})"), "2026-12"));
}

}  // namespace
}  // namespace headway::serving::guided
