// Sets of Unicode scalar values (code points other than the surrogates) as sorted, disjoint,
// non-adjacent ranges, and their UTF-8 form as sequences of byte ranges: what a regular
// expression's character class becomes before it is an automaton over bytes.
//
// Threading: plain values and pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace headway::serving::guided {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  uint32_t low;
  uint32_t high;  // inclusive
  bool operator==(const CodePointRange&) const = default;
};

class CodePointSet {
 public:
  CodePointSet() = default;
  // Any scalar value.
  static CodePointSet all();
  // The scalar values from low to high (high >= low, high <= kMaxCodePoint).
  static CodePointSet range(uint32_t low, uint32_t high);

  void add(uint32_t low, uint32_t high);  // high >= low, high <= kMaxCodePoint
  void add(const CodePointSet& other);
  // The scalar values not in this set.
  CodePointSet complement() const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<CodePointRange>& ranges() const { return ranges_; }

 private:
  std::vector<CodePointRange> ranges_;  // sorted, disjoint, non-adjacent, no surrogates
};

// One way to write some of a set's characters in UTF-8: byte i lies in ranges[i], for 1 to 4
// bytes. Every sequence of bytes that fits is a shortest-form character of the set.
struct Utf8Sequence {
  uint8_t length = 0;
  uint8_t low[4] = {};
  uint8_t high[4] = {};
};

// The UTF-8 form of `set`: the characters whose encoding fits one of the sequences, each in
// exactly one.
std::vector<Utf8Sequence> utf8_sequences(const CodePointSet& set);

}  // namespace headway::serving::guided
