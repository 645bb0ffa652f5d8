// Context-free grammars as guided decoding reads them (vLLM's guided_grammar and
// structured_outputs.grammar): the GBNF notation of llama.cpp, which xgrammar, vLLM's default
// guided decoding engine, also reads.
//
//   root    ::= greeting (", " name)* "!"     # a rule per definition; `root` is the answer
//   name    ::= [A-Z] [a-z]+
//   greeting ::= "hello" | "hi"
//
//   "text" (escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH), [a-z] and [^...] classes,
//   '.' (any character), rule names (letters, digits, '-' and '_'), groups ( ... ), alternation |,
//   the quantifiers * + ? {n} {n,} {n,m}, and comments from '#' to the end of the line.
//
// A definition runs until the next `name ::=`, so an alternation may go on over several lines,
// as xgrammar allows (llama.cpp's grammars, which end a definition at a line's end, read the
// same). Characters are Unicode code points, as in both; the answer is their UTF-8.
//
// Refused, with the line and column: xgrammar's lookahead assertions `(= ...)` and anything
// else outside the notation, a rule defined twice, a rule used but not defined, no `root`.
//
// Threading: pure functions; a parsed grammar is a plain value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "code_point_set.h"
#include "regex_syntax.h"

namespace headway::serving::guided {

inline constexpr size_t kMaxGrammarBytes = 65536;

enum class EbnfKind : uint8_t {
  kEmpty,     // the empty text ("")
  kChars,     // one character of `chars`
  kRule,      // the rule `rule`
  kSequence,  // `children` one after another
  kChoice,    // any one of `children`
  kRepeat,    // children[0], between min and max times (max kUnboundedRepeat: any)
};

struct EbnfExpr {
  EbnfKind kind = EbnfKind::kEmpty;
  CodePointSet chars;
  uint32_t rule = 0;
  std::vector<uint32_t> children;
  uint32_t min = 0;
  uint32_t max = 0;
};

struct EbnfRule {
  std::string name;
  uint32_t body = 0;  // an index into EbnfGrammar::exprs
  size_t at = 0;      // where it is defined (a byte offset in the text), for messages
};

struct EbnfGrammar {
  std::vector<EbnfExpr> exprs;
  std::vector<EbnfRule> rules;
  uint32_t root = 0;  // the rule named "root"
};

// Throws ServiceError (kInvalidArgument, param `field`) naming what is wrong and where (line and
// column, from 1).
EbnfGrammar parse_ebnf(std::string_view text, const std::string& field);

}  // namespace headway::serving::guided
