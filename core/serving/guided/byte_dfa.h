// A regular expression (regex_syntax.h) as a deterministic automaton over UTF-8 bytes, which the
// grammar matcher steps one byte at a time. Built by Thompson's construction and the subset
// construction over byte classes (bytes no transition tells apart share a column), then pruned:
// a state from which no accepting state can be reached is dead, so a byte is refused as soon as
// no match can follow it, never later.
//
// Ownership: a plain value. Threading: immutable once built, shared freely.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "regex_syntax.h"

namespace headway::serving::guided {

// Bounds on what one pattern may cost (memory, and the compile on the request's path): a pattern
// past them is refused with the figure (such as (a|b)*a(a|b){20}, whose automaton has 2^21 states).
// kMaxPatternCells bounds a table's memory (states times byte classes, 4 bytes each: 16 MB), for
// one pattern and for all of a grammar's together.
inline constexpr size_t kMaxNfaStates = 200000;
inline constexpr size_t kMaxPatternCells = size_t{4} << 20;
inline constexpr size_t kMaxDfaStates = 65536;
inline constexpr size_t kMaxSubsetWork = 5'000'000;

// What compiles may still spend, in subset-construction steps (NFA states visited): one pattern's
// own, or one a schema's patterns share (json_schema.cpp), so that many patterns cannot add up
// to what one may not cost.
struct CompileBudget {
  size_t steps = kMaxSubsetWork;
};

class ByteDfa {
 public:
  static constexpr uint32_t kDead = UINT32_MAX;

  uint32_t start() const { return start_; }
  // The state after `byte`, or kDead when no match can go on that way.
  uint32_t next(uint32_t state, uint8_t byte) const {
    return table_[static_cast<size_t>(state) * classes_ + class_of_[byte]];
  }
  bool accepting(uint32_t state) const { return accepting_[state] != 0; }
  size_t states() const { return accepting_.size(); }
  // The table's size: states times byte classes.
  size_t cells() const { return table_.size(); }

 private:
  friend ByteDfa build_byte_dfa(const RegexTree&, bool, const std::string&, CompileBudget&);
  friend ByteDfa intersect(const ByteDfa&, const ByteDfa&, const std::string&);
  friend ByteDfa with_length(const ByteDfa&, uint32_t, uint32_t, const std::string&);
  // The automaton whose states are pairs reached from `start` (byte_dfa.cpp: intersect and
  // with_length). class_key(byte) tells apart the bytes the pairs may treat differently;
  // step(pair, byte) is the next pair (first kDead: none); accepting(pair).
  using StatePair = std::pair<uint32_t, uint32_t>;
  template <typename ClassKey, typename Step, typename Accepting>
  static ByteDfa of_pairs(ClassKey class_key, StatePair start, Step step, Accepting accepting,
                          const std::string& field, const char* what, const char* why_none);
  // Drops the states no accepting one can be reached from; throws (naming `field`) when that
  // is the start, with `why_none` appended to the message.
  void prune(const std::string& field, const char* why_none);
  std::array<uint8_t, 256> class_of_{};
  uint32_t classes_ = 0;
  std::vector<uint32_t> table_;  // state * classes_ + class -> state or kDead
  std::vector<uint8_t> accepting_;
  uint32_t start_ = 0;
};

// `json_string`: the matched text sits between a JSON string's quotes as written, so '"', '\\'
// and control characters never come (a pattern that needs them is refused: no string could
// follow it). Throws ServiceError (kInvalidArgument, param `field`) for a pattern past the
// limits or one no string matches.
ByteDfa build_byte_dfa(const RegexTree& tree, bool json_string, const std::string& field,
                       CompileBudget& budget);

// The strings both accept. Throws like build_byte_dfa when there are none or too many states.
ByteDfa intersect(const ByteDfa& a, const ByteDfa& b, const std::string& field);

// The strings `dfa` accepts that have between min and max characters (code points; max
// kUnboundedRepeat: any). Throws like intersect.
ByteDfa with_length(const ByteDfa& dfa, uint32_t min, uint32_t max, const std::string& field);

// parse_regex then build_byte_dfa.
ByteDfa compile_regex(std::string_view pattern, RegexMatch match, bool json_string,
                      const std::string& field, CompileBudget& budget);
ByteDfa compile_regex(std::string_view pattern, RegexMatch match, bool json_string,
                      const std::string& field);  // with a budget of its own

}  // namespace headway::serving::guided
