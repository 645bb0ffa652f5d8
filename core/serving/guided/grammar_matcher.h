// Walks a Grammar one byte at a time: where a guided request's output stands, and whether a next
// byte may come. A place in the grammar is a MatchState: the possible parse stacks (several only
// while an anyOf has not been decided yet), each a stack of frames (the open object, the string
// being read, ...).
//
// The step loop and the vocabulary scan advance states millions of times, so a MatchState keeps
// its storage: advance() into a state that held as much before allocates nothing.
//
// Ownership: the matcher keeps a reference to the grammar, which must outlive it.
// Threading: a matcher has scratch space, so one thread at a time; states are plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar.h"

namespace headway::serving::guided {

// One open construct; what the fields mean depends on `kind` (grammar_matcher.cpp).
struct MatchFrame {
  uint8_t kind = 0;
  uint8_t phase = 0;
  uint16_t pending = 0;  // kString: UTF-8 continuation bytes still due
  uint32_t node = 0;
  uint32_t a = 0;
  uint32_t b = 0;
  bool operator==(const MatchFrame&) const = default;
};

struct MatchState {
  std::vector<MatchFrame> frames;  // the stacks, one after another, bottom first
  std::vector<uint32_t> ends;      // stack i is frames[ends[i - 1], ends[i])
  // No stack is left: the bytes so far cannot begin an output of the grammar.
  bool dead() const { return ends.empty(); }
  // The bytes of the state (frames and stack ends), appended to `key`: equal keys, equal states.
  void append_key(std::string& key) const;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(const Grammar& grammar);

  // The state before any byte; `leading_whitespace`: how many spaces, tabs and newlines may come
  // before the value (the blank line after a model's reasoning).
  void start(MatchState& out, uint32_t leading_whitespace = 0) const;
  // `out` becomes `in` after `byte`; false when the byte may not come there (out is dead).
  bool advance(const MatchState& in, uint8_t byte, MatchState& out) const;
  // Whether the bytes so far are a complete output (it may still go on, as a number may).
  bool complete(const MatchState& state) const;
  // Whether `state` is inside a JSON string of no length limit, between characters and escapes:
  // there, any run of whole characters other than controls, '"' and '\\' fits and leaves it so.
  bool in_plain_string(const MatchState& state) const;
  // Whether `state` is one stack reading a pattern (a string's characters, or raw text at the
  // root): then its automaton, with the automaton's state in `automaton_state`. The bytes the
  // automaton takes change nothing else of the place; set_automaton_state() makes the place it
  // reaches. Where the automaton refuses a byte after a match, the pattern may end there only if
  // the byte is `closing` ('"' for a string; kNothingCloses at the root, where nothing follows
  // raw text). Raw text inside a grammar may end at any match, even where the automaton would
  // take the byte, and the place below it reads on: there `closing` is kParentReads, and
  // parent_place() is that place.
  static constexpr int kNothingCloses = -1;
  static constexpr int kParentReads = 256;
  const ByteDfa* automaton_at(const MatchState& state, uint32_t& automaton_state,
                              int& closing) const;
  static void set_automaton_state(MatchState& state, uint32_t automaton_state);
  // Where kParentReads: the place once the text has ended (`state` without its top frame).
  static void parent_place(const MatchState& state, MatchState& out);

 private:
  enum class Step { kConsumed, kRejected, kRetry };
  // Feeds `byte` to the stack that starts at out.frames[begin] (the last one there): appends its
  // end to out.ends (keep()), or removes the stack; a fork's other ways wait in the work list.
  // `work`: the pieces this byte has taken so far (kMaxForkWork).
  void feed(MatchState& out, size_t begin, uint8_t byte, size_t& work) const;
  // Puts frames[begin, end) on the work list as a stack of its own.
  void wait(const std::vector<MatchFrame>& frames, size_t begin, size_t end) const;
  // Appends the stack that ends out.frames (from `begin`) to out.ends; drops it where an equal
  // one is there already, or past the limits.
  static void keep(MatchState& out, size_t begin);
  // Whether the stack's top frame may both close (its parent reading the byte) and go on with
  // it: a repeat between its counts, raw text inside a grammar at a match.
  bool may_close_or_go_on(const std::vector<MatchFrame>& frames, size_t begin, uint8_t byte) const;
  // Whether the frame may close with no more bytes; nullable(): whether a value may be empty.
  bool closes_now(const MatchFrame& frame) const;
  bool nullable(uint32_t node) const;
  Step step(std::vector<MatchFrame>& frames, size_t begin, uint8_t byte) const;
  Step step_sequence(std::vector<MatchFrame>& frames) const;
  void begin_item(std::vector<MatchFrame>& frames) const;
  Step step_value(std::vector<MatchFrame>& frames, uint8_t byte) const;
  Step step_object(std::vector<MatchFrame>& frames, uint8_t byte) const;
  Step step_key(std::vector<MatchFrame>& frames, size_t begin, uint8_t byte) const;
  Step step_array(std::vector<MatchFrame>& frames, uint8_t byte) const;
  Step step_string(std::vector<MatchFrame>& frames, uint8_t byte) const;
  Step step_number(std::vector<MatchFrame>& frames, uint8_t byte) const;
  Step step_bounded_integer(MatchFrame& top, uint8_t byte) const;
  Step step_bounded_number(MatchFrame& top, uint8_t byte) const;
  bool bounded_number_in_range(const MatchFrame& frame) const;
  Step step_literal(std::vector<MatchFrame>& frames, size_t begin, uint8_t byte) const;
  Step step_pattern(std::vector<MatchFrame>& frames, uint8_t byte) const;
  const ByteDfa& pattern_of(uint32_t node) const;
  // Of an object's properties from `from` on, one past the last that may come next (all before
  // it optional).
  uint32_t key_window_end(const GrammarNode& object, uint32_t from) const;
  // Whether the object in `frame` may begin another property (one of those its window offers
  // that fits, or a free key within max_properties).
  bool may_add_property(const GrammarNode& object, const MatchFrame& frame) const;

  const Grammar& grammar_;
  // advance()'s work list: stacks waiting to be fed, one after another (the scratch it keeps).
  mutable std::vector<MatchFrame> pending_frames_;
  mutable std::vector<uint32_t> pending_ends_;
};

}  // namespace headway::serving::guided
