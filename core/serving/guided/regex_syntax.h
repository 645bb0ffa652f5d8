// Regular expressions as guided decoding reads them (vLLM's guided_regex, JSON Schema's
// "pattern"): the syntax common to Python's re and ECMAScript that describes a set of strings.
//
//   literals (any UTF-8 character; '\' before punctuation), '.', classes [a-z], [^...] with
//   \d \w \s \D \W \S, the escapes \n \t \r \f \v \0 \xHH \uHHHH (a surrogate pair of them is
//   one character), groups (...), (?:...), (?P<name>...) and (?<name>...), alternation |, the
//   quantifiers * + ? {n} {n,} {n,m} (lazy forms allowed: they match the same strings), and
//   '^' / '$' at the start / end of a top-level alternative.
//
// An answer must match in both engines, so where they differ the narrower reading is taken:
// \d \w \s are ASCII, \D \W their ASCII complements, \S no space of either engine, '.' no line
// terminator of either (\n, \r, U+2028, U+2029).
//
// Refused, with the position: backreferences, lookaround, word boundaries, anchors elsewhere,
// inline flags, possessive quantifiers, POSIX classes, octal escapes, counts without a minimum
// ({,m}), counts above kMaxRepeat. Those either describe no regular language or are read
// differently by different engines, and a guide that silently read a pattern another way would
// hand out wrong answers.
//
// Threading: pure functions; a tree is a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "code_point_set.h"

namespace headway::serving::guided {

inline constexpr uint32_t kMaxRepeat = 1000;
inline constexpr size_t kMaxPatternBytes = 16384;

enum class RegexKind : uint8_t {
  kEmpty,      // the empty string
  kChars,      // one character of `chars`
  kConcat,     // `children` one after another
  kAlternate,  // any one of `children`
  kRepeat,     // children[0], between min and max times (max kUnboundedRepeat: any)
};

inline constexpr uint32_t kUnboundedRepeat = UINT32_MAX;

struct RegexNode {
  RegexKind kind = RegexKind::kEmpty;
  CodePointSet chars;
  std::vector<uint32_t> children;
  uint32_t min = 0;
  uint32_t max = 0;
};

struct RegexTree {
  std::vector<RegexNode> nodes;
  uint32_t root = 0;
};

enum class RegexMatch : uint8_t {
  kWhole,   // the string is exactly a match ('^' and '$' change nothing): guided_regex
  kSearch,  // the string contains a match, unless '^' / '$' pin it (JSON Schema's "pattern")
};

// Throws ServiceError (kInvalidArgument, param `field`) naming what is wrong and where.
RegexTree parse_regex(std::string_view pattern, RegexMatch match, const std::string& field);

}  // namespace headway::serving::guided
