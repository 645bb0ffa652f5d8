#include "grammar_matcher.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "utf8_rules.h"

namespace headway::serving::guided {

namespace {

static_assert(sizeof(MatchFrame) == 16, "MatchFrame is compared and hashed as bytes");

// A string frame's node for keys of objects with free keys: no length limits.
constexpr uint32_t kNoNode = UINT32_MAX;

enum FrameKind : uint8_t {
  kValue = 1,  // a value of `node` not begun yet
  // a: next declared property (free keys: the properties written), b: the property whose value
  // is being read, pending: declared properties written. Written properties are counted (as
  // kArray counts) only where min_properties or max_properties read the count.
  kObject,
  kKey,  // a declared key being read. node: the object, a: candidate property, b: bytes read
  // a: items begun (saturating, counted only where limits need it), b: with unique_items, the
  // values written (bit i: literal i of the items' node)
  kArray,
  kString,      // phase: escape state, pending: UTF-8 bytes due, a: characters (as kArray counts)
  kNumber,      // phase: where in the number
  kLiteral,     // a: lowest literal that matches the bytes read, b: bytes read
  kLead,        // whitespace before the root value; a: bytes of it read, b: how many may be
  kPatterned,   // a string's characters under its pattern; a: the automaton's state
  kRegexText,   // raw text under the node's pattern; a: the automaton's state
  kSequenceAt,  // a: the next part
  kRepeatAt,    // a: items read (as kArray counts)
};

enum ObjectPhase : uint8_t {
  kObjectOpen,        // after '{'
  kObjectKeyDone,     // after a key's closing quote
  kObjectColon,       // after ':'
  kObjectColonSpace,  // after ": "
  kObjectValueDone,   // after a value
  kObjectComma,       // after ','
  kObjectCommaSpace,  // after ", "
};

enum ArrayPhase : uint8_t { kArrayOpen, kArrayValueDone, kArrayComma, kArrayCommaSpace };

// String escape states: 0 plain, 1 after '\', 2..5 reading \u's hex digits.
constexpr uint8_t kStringPlain = 0;
constexpr uint8_t kStringEscape = 1;
constexpr uint8_t kStringHexFirst = 2;
constexpr uint8_t kStringHexDone = 6;
constexpr uint32_t kLowSurrogateDue = 0x100;

enum NumberPhase : uint8_t {
  kNumberSign,       // after '-'
  kNumberZero,       // integer part "0"
  kNumberInt,        // integer part [1-9][0-9]*
  kNumberDot,        // after '.'
  kNumberFraction,   // fraction digits
  kNumberExp,        // after 'e' or 'E'
  kNumberExpSign,    // after the exponent's sign
  kNumberExpDigits,  // exponent digits
};

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

MatchFrame frame(FrameKind kind, uint32_t node, uint8_t phase = 0) {
  MatchFrame f;
  f.kind = kind;
  f.node = node;
  f.phase = phase;
  return f;
}

// Counting up to the largest limit that reads the count; past it the count no longer matters, so
// it stops, and states that differ only in a count nobody reads are equal (and share masks).
uint32_t count_one(uint32_t count, uint32_t min, uint32_t max) {
  const uint32_t cap = std::max(min, max == kUnbounded ? 0 : max);
  return count < cap ? count + 1 : count;
}

// Bounded integers' and numbers' pending flags (step_bounded_integer, step_bounded_number),
// and where a bounded number's fraction keeps its Orders and digit count.
constexpr uint16_t kNegative = 1;
constexpr uint16_t kNothingYet = 2;
constexpr int kLowOrderShift = 2;
constexpr int kHighOrderShift = 4;
constexpr int kDigitsShift = 6;  // 10 bits: at most NumberRange::max_fraction_digits()

bool number_is_complete(uint8_t phase) {
  return phase == kNumberZero || phase == kNumberInt || phase == kNumberFraction ||
         phase == kNumberExpDigits;
}

// The properties an object frame has written (what min_properties and max_properties count).
uint32_t properties_written(const GrammarNode& object, const MatchFrame& frame) {
  return object.free_keys ? frame.a : frame.pending;
}

// Whether declared property `j` may be the next one an object writes after `written` others: the
// rest can still reach min_properties (all of them written) and stay within max_properties (the
// required ones alone); both hold for some choice of the rest, as min <= max. Here, in the key
// walk's inner loop, so that it inlines.
bool property_fits(const GrammarNode& object, uint32_t written, uint32_t j) {
  const auto after = static_cast<uint32_t>(object.properties.size()) - j - 1;
  return written + 1 + object.properties[j].required_after <= object.max_properties &&
         written + 1 + after >= object.min_properties;
}

}  // namespace

void MatchState::append_key(std::string& key) const {
  const auto stacks = static_cast<uint32_t>(ends.size());
  key.append(reinterpret_cast<const char*>(&stacks), sizeof(stacks));
  const size_t at = key.size();
  const size_t frame_bytes = frames.size() * sizeof(MatchFrame);
  const size_t end_bytes = ends.size() * sizeof(uint32_t);
  key.resize(at + frame_bytes + end_bytes);
  if (frame_bytes > 0) std::memcpy(key.data() + at, frames.data(), frame_bytes);
  if (end_bytes > 0) std::memcpy(key.data() + at + frame_bytes, ends.data(), end_bytes);
}

GrammarMatcher::GrammarMatcher(const Grammar& grammar) : grammar_(grammar) {}

void GrammarMatcher::start(MatchState& out, uint32_t leading_whitespace) const {
  out.frames.assign(1, frame(kValue, grammar_.root));
  // Raw text (a regular expression's, a choice's, a grammar's) is the answer as written: a blank
  // before it would be part of it.
  if (leading_whitespace > 0 && !grammar_.raw_text) {
    out.frames.insert(out.frames.begin(), frame(kLead, grammar_.root));
    out.frames[0].b = leading_whitespace;
    out.frames.pop_back();  // the lead frame becomes the value once a non-space byte comes
  }
  out.ends.assign(1, 1);
}

bool GrammarMatcher::advance(const MatchState& in, uint8_t byte, MatchState& out) const {
  out.frames.clear();
  out.ends.clear();
  pending_frames_.clear();
  pending_ends_.clear();
  size_t work = 0;
  uint32_t from = 0;
  for (const uint32_t end : in.ends) {
    out.frames.insert(out.frames.end(), in.frames.begin() + from, in.frames.begin() + end);
    feed(out, out.frames.size() - (end - from), byte, work);
    // The stacks its forks left waiting, last first. A work list, not recursion: a chain of
    // forks and closes as deep as the stack costs no call depth.
    while (!pending_ends_.empty()) {
      pending_ends_.pop_back();
      const uint32_t waiting = pending_ends_.empty() ? 0 : pending_ends_.back();
      const size_t begin = out.frames.size();
      out.frames.insert(out.frames.end(), pending_frames_.begin() + waiting, pending_frames_.end());
      pending_frames_.resize(waiting);
      feed(out, begin, byte, work);
    }
    from = end;
  }
  return !out.dead();
}

bool GrammarMatcher::complete(const MatchState& state) const {
  uint32_t from = 0;
  for (const uint32_t end : state.ends) {
    bool closes = true;
    for (uint32_t i = from; i < end && closes; ++i) closes = closes_now(state.frames[i]);
    if (closes) return true;  // (an empty stack: everything closed)
    from = end;
  }
  return false;
}

bool GrammarMatcher::nullable(uint32_t node) const {
  const GrammarNode& value = grammar_.nodes[node];
  if (value.kind == NodeKind::kRegex) return pattern_of(node).accepting(pattern_of(node).start());
  return value.nullable;
}

bool GrammarMatcher::closes_now(const MatchFrame& frame) const {
  // A free key's string frame has no node (kNoNode); it never closes without its quote.
  const GrammarNode& node = grammar_.nodes[frame.node < grammar_.nodes.size() ? frame.node : 0];
  switch (frame.kind) {
    case kValue:
      return nullable(frame.node);
    case kNumber: {
      if (node.kind == NodeKind::kNumber && node.number.bounded()) {
        return bounded_number_in_range(frame);
      }
      if (!number_is_complete(frame.phase)) return false;
      const uint64_t magnitude = static_cast<uint64_t>(frame.b) << 32 | frame.a;
      const bool negative = (frame.pending & kNegative) != 0;
      return node.kind != NodeKind::kInteger || !node.range.bounded() ||
             node.range.contains(negative ? -static_cast<__int128>(magnitude) : magnitude);
    }
    case kLiteral:
      return node.literals[frame.a].size() == frame.b;
    case kRegexText:
      return pattern_of(frame.node).accepting(frame.a);
    case kSequenceAt:
      for (size_t part = frame.a; part < node.parts.size(); ++part) {
        if (!nullable(node.parts[part])) return false;
      }
      return true;
    case kRepeatAt:
      return frame.a >= node.min_items;
    default:
      return false;  // an object, an array, a string, a key: a closing byte is due
  }
}

bool GrammarMatcher::in_plain_string(const MatchState& state) const {
  if (state.ends.size() != 1 || state.frames.empty()) return false;
  const MatchFrame& top = state.frames.back();
  if (top.kind != kString || top.phase != kStringPlain || top.pending != 0 ||
      (top.b & kLowSurrogateDue) != 0) {
    return false;
  }
  return top.node == kNoNode || grammar_.nodes[top.node].max_length == kUnbounded;
}

const ByteDfa* GrammarMatcher::automaton_at(const MatchState& state, uint32_t& automaton_state,
                                            int& closing) const {
  if (state.ends.size() != 1 || state.frames.empty()) return nullptr;
  const MatchFrame& top = state.frames.back();
  if (top.kind != kPatterned && top.kind != kRegexText) return nullptr;
  automaton_state = top.a;
  if (top.kind == kPatterned) {
    closing = '"';
  } else {
    closing = state.frames.size() == 1 ? kNothingCloses : kParentReads;
  }
  return &pattern_of(top.node);
}

void GrammarMatcher::set_automaton_state(MatchState& state, uint32_t automaton_state) {
  state.frames.back().a = automaton_state;
}

void GrammarMatcher::parent_place(const MatchState& state, MatchState& out) {
  out.frames.assign(state.frames.begin(), state.frames.end() - 1);
  out.ends.assign(1, static_cast<uint32_t>(out.frames.size()));
}

void GrammarMatcher::feed(MatchState& out, size_t begin, uint8_t byte, size_t& work) const {
  for (;;) {
    // A byte whose forks pass the bound (grammar.h) drops the rest; no real grammar comes near.
    if (++work > kMaxForkWork) {
      out.frames.resize(begin);
      return;
    }
    // A stack that closed its last construct reads no more bytes.
    if (out.frames.size() == begin) return;
    const MatchFrame top = out.frames.back();
    if (top.kind == kValue && grammar_.nodes[top.node].kind == NodeKind::kAnyOf) {
      // The other branches wait their turn (advance() feeds them); the first goes on here.
      const std::vector<uint32_t>& branches = grammar_.nodes[top.node].branches;
      for (size_t i = branches.size(); i-- > 1;) {
        wait(out.frames, begin, out.frames.size());
        pending_frames_.back().node = branches[i];
      }
      out.frames.back().node = branches.front();
      continue;
    }
    if (may_close_or_go_on(out.frames, begin, byte)) {
      // The stack without its top frame (the parent reading the byte) waits its turn; the
      // stack goes on with the byte here.
      wait(out.frames, begin, out.frames.size() - 1);
      MatchFrame& going = out.frames.back();
      if (going.kind == kRegexText) {
        going.a = pattern_of(going.node).next(going.a, byte);
        keep(out, begin);
        return;
      }
      begin_item(out.frames);  // kRepeatAt: one more item
      continue;
    }
    switch (step(out.frames, begin, byte)) {
      case Step::kConsumed:
        keep(out, begin);
        return;
      case Step::kRejected:
        out.frames.resize(begin);
        return;
      case Step::kRetry:
        break;
    }
  }
}

void GrammarMatcher::wait(const std::vector<MatchFrame>& frames, size_t begin, size_t end) const {
  pending_frames_.insert(pending_frames_.end(), frames.begin() + static_cast<std::ptrdiff_t>(begin),
                         frames.begin() + static_cast<std::ptrdiff_t>(end));
  pending_ends_.push_back(static_cast<uint32_t>(pending_frames_.size()));
}

void GrammarMatcher::keep(MatchState& out, size_t begin) {
  const size_t size = out.frames.size() - begin;
  // An equal stack is the same parse: one is kept, so the bound counts different parses.
  uint32_t from = 0;
  bool seen = false;
  for (size_t i = 0; i < out.ends.size() && !seen; ++i) {
    const uint32_t end = out.ends[i];
    seen =
        end - from == size && std::equal(out.frames.begin() + from, out.frames.begin() + end,
                                         out.frames.begin() + static_cast<std::ptrdiff_t>(begin));
    from = end;
  }
  // Past these, ambiguity or nesting no real schema or grammar reaches (grammar.h).
  if (seen || out.ends.size() >= kMaxStacks || size > kMaxStackFrames) {
    out.frames.resize(begin);
    return;
  }
  out.ends.push_back(static_cast<uint32_t>(out.frames.size()));
}

bool GrammarMatcher::may_close_or_go_on(const std::vector<MatchFrame>& frames, size_t begin,
                                        uint8_t byte) const {
  const MatchFrame& top = frames.back();
  if (top.kind == kRepeatAt) {
    const GrammarNode& repeat = grammar_.nodes[top.node];
    return top.a >= repeat.min_items && top.a < repeat.max_items;
  }
  // Raw text inside a grammar (not at the root, where nothing follows it) may end at a match.
  if (top.kind == kRegexText && frames.size() - begin > 1) {
    const ByteDfa& dfa = pattern_of(top.node);
    return dfa.accepting(top.a) && dfa.next(top.a, byte) != ByteDfa::kDead;
  }
  return false;
}

GrammarMatcher::Step GrammarMatcher::step(std::vector<MatchFrame>& frames, size_t begin,
                                          uint8_t byte) const {
  switch (frames.back().kind) {
    case kValue:
      return step_value(frames, byte);
    case kObject:
      return step_object(frames, byte);
    case kKey:
      return step_key(frames, begin, byte);
    case kArray:
      return step_array(frames, byte);
    case kString:
      return step_string(frames, byte);
    case kNumber:
      return step_number(frames, byte);
    case kLiteral:
      return step_literal(frames, begin, byte);
    case kPatterned:
    case kRegexText:
      return step_pattern(frames, byte);
    case kSequenceAt:
      return step_sequence(frames);
    case kRepeatAt:
      // Only one of going on and closing is left here (may_close_or_go_on forks where both are).
      if (frames.back().a < grammar_.nodes[frames.back().node].max_items) {
        begin_item(frames);
      } else {
        frames.pop_back();
      }
      return Step::kRetry;
    case kLead: {
      MatchFrame& lead = frames.back();
      const bool space = byte == ' ' || byte == '\n' || byte == '\r' || byte == '\t';
      if (space && lead.a < lead.b) {
        ++lead.a;
        return Step::kConsumed;
      }
      lead = frame(kValue, lead.node);
      return Step::kRetry;
    }
    default:
      return Step::kRejected;
  }
}

GrammarMatcher::Step GrammarMatcher::step_value(std::vector<MatchFrame>& frames,
                                                uint8_t byte) const {
  MatchFrame& top = frames.back();
  switch (grammar_.nodes[top.node].kind) {
    case NodeKind::kObject:
      if (byte != '{') return Step::kRejected;
      top = frame(kObject, top.node, kObjectOpen);
      return Step::kConsumed;
    case NodeKind::kArray:
      if (byte != '[') return Step::kRejected;
      top = frame(kArray, top.node, kArrayOpen);
      return Step::kConsumed;
    case NodeKind::kString:
      if (byte != '"') return Step::kRejected;
      if (grammar_.nodes[top.node].pattern != kNoPattern) {
        const uint32_t node = top.node;
        top = frame(kPatterned, node);
        top.a = pattern_of(node).start();
        return Step::kConsumed;
      }
      top = frame(kString, top.node, kStringPlain);
      return Step::kConsumed;
    case NodeKind::kRegex: {
      const uint32_t node = top.node;
      top = frame(kRegexText, node);
      top.a = pattern_of(node).start();
      return Step::kRetry;
    }
    case NodeKind::kInteger:
      if (grammar_.nodes[top.node].range.bounded()) {
        top = frame(kNumber, top.node, kNumberSign);
        top.pending = kNothingYet;  // nothing yet: the byte is read as the number's first
        return step_bounded_integer(top, byte);
      }
      [[fallthrough]];
    case NodeKind::kNumber:
      if (grammar_.nodes[top.node].kind == NodeKind::kNumber &&
          grammar_.nodes[top.node].number.bounded()) {
        top = frame(kNumber, top.node, kNumberSign);
        top.pending = kNothingYet;
        return step_bounded_number(top, byte);
      }
      if (byte == '-') {
        top = frame(kNumber, top.node, kNumberSign);
      } else if (byte == '0') {
        top = frame(kNumber, top.node, kNumberZero);
      } else if (byte >= '1' && byte <= '9') {
        top = frame(kNumber, top.node, kNumberInt);
      } else {
        return Step::kRejected;
      }
      return Step::kConsumed;
    case NodeKind::kLiterals:
      top = frame(kLiteral, top.node);
      return Step::kRetry;
    case NodeKind::kSequence:
      top = frame(kSequenceAt, top.node);
      return Step::kRetry;
    case NodeKind::kRepeat:
      top = frame(kRepeatAt, top.node);
      return Step::kRetry;
    case NodeKind::kAnyOf:
      break;  // feed() forks these before they get here
  }
  return Step::kRejected;
}

uint32_t GrammarMatcher::key_window_end(const GrammarNode& object, uint32_t from) const {
  const auto count = static_cast<uint32_t>(object.properties.size());
  for (uint32_t j = from; j < count; ++j) {
    if (object.properties[j].required) return j + 1;
  }
  return count;
}

bool GrammarMatcher::may_add_property(const GrammarNode& object, const MatchFrame& frame) const {
  const uint32_t written = properties_written(object, frame);
  if (object.free_keys) return written < object.max_properties;
  const uint32_t end = key_window_end(object, frame.a);
  for (uint32_t j = frame.a; j < end; ++j) {
    if (property_fits(object, written, j)) return true;
  }
  return false;
}

GrammarMatcher::Step GrammarMatcher::step_object(std::vector<MatchFrame>& frames,
                                                 uint8_t byte) const {
  MatchFrame& top = frames.back();
  const GrammarNode& object = grammar_.nodes[top.node];
  // '}' may come once no required property is left and min_properties are written.
  const uint32_t window_end = key_window_end(object, top.a);
  const bool may_close =
      (object.free_keys || window_end == top.a || !object.properties[window_end - 1].required) &&
      properties_written(object, top) >= object.min_properties;
  const auto begin_key = [&]() {
    if (!may_add_property(object, top)) return Step::kRejected;
    if (object.free_keys) {
      top.a = count_one(top.a, object.min_properties, object.max_properties);
      top.phase = kObjectKeyDone;
      if (object.free_key != kAnyKey) {  // the key's own schema reads it, its '"' first
        frames.push_back(frame(kValue, object.free_key));
        return Step::kRetry;
      }
      frames.push_back(frame(kString, kNoNode, kStringPlain));
      return Step::kConsumed;
    }
    top.phase = kObjectKeyDone;
    MatchFrame key = frame(kKey, top.node);
    key.a = top.a;  // every property in the window matches the empty prefix
    frames.push_back(key);
    return Step::kConsumed;
  };
  const auto begin_value = [&]() {
    const uint32_t value = object.free_keys ? object.free_value : object.properties[top.b].value;
    top.phase = kObjectValueDone;
    frames.push_back(frame(kValue, value));
    return Step::kRetry;
  };
  switch (top.phase) {
    case kObjectOpen:
      if (byte == '"') return begin_key();
      if (byte == '}' && may_close) {
        frames.pop_back();
        return Step::kConsumed;
      }
      return Step::kRejected;
    case kObjectKeyDone:
      if (byte != ':') return Step::kRejected;
      top.phase = kObjectColon;
      return Step::kConsumed;
    case kObjectColon:
      if (byte == ' ') {
        top.phase = kObjectColonSpace;
        return Step::kConsumed;
      }
      return begin_value();
    case kObjectColonSpace:
      return begin_value();
    case kObjectValueDone:
      if (byte == ',' && may_add_property(object, top)) {
        top.phase = kObjectComma;
        return Step::kConsumed;
      }
      if (byte == '}' && may_close) {
        frames.pop_back();
        return Step::kConsumed;
      }
      return Step::kRejected;
    case kObjectComma:
      if (byte == ' ') {
        top.phase = kObjectCommaSpace;
        return Step::kConsumed;
      }
      return byte == '"' ? begin_key() : Step::kRejected;
    case kObjectCommaSpace:
      return byte == '"' ? begin_key() : Step::kRejected;
    default:
      return Step::kRejected;
  }
}

GrammarMatcher::Step GrammarMatcher::step_key(std::vector<MatchFrame>& frames, size_t begin,
                                              uint8_t byte) const {
  if (frames.size() < begin + 2) return Step::kRejected;  // a key always sits on its object
  MatchFrame& key = frames.back();
  MatchFrame& owner = frames[frames.size() - 2];
  const GrammarNode& object = grammar_.nodes[key.node];
  const std::string& matched = object.properties[key.a].key;
  const uint32_t end = key_window_end(object, owner.a);
  const uint32_t written = properties_written(object, owner);
  // The properties that match the bytes read are those whose key starts like the candidate's,
  // among those that fit.
  for (uint32_t j = key.a; j < end; ++j) {
    if (!property_fits(object, written, j)) continue;
    const std::string& candidate = object.properties[j].key;
    if (candidate.size() < key.b || candidate.compare(0, key.b, matched, 0, key.b) != 0) continue;
    if (candidate.size() > key.b && static_cast<uint8_t>(candidate[key.b]) == byte) {
      key.a = j;
      ++key.b;
      return Step::kConsumed;
    }
    if (byte == '"' && candidate.size() == key.b) {
      owner.b = j;
      owner.a = j + 1;
      owner.pending = static_cast<uint16_t>(
          count_one(owner.pending, object.min_properties, object.max_properties));
      frames.pop_back();
      return Step::kConsumed;
    }
  }
  return Step::kRejected;
}

GrammarMatcher::Step GrammarMatcher::step_array(std::vector<MatchFrame>& frames,
                                                uint8_t byte) const {
  MatchFrame& top = frames.back();
  const GrammarNode& array = grammar_.nodes[top.node];
  const auto begin_item = [&]() {
    if (top.a >= array.max_items) return Step::kRejected;
    const auto fixed = static_cast<uint32_t>(array.prefix_items.size());
    const uint32_t item = top.a < fixed ? array.prefix_items[top.a] : array.items;
    top.phase = kArrayValueDone;
    // Counted exactly through the tuple's positions too.
    top.a = count_one(top.a, std::max(array.min_items, fixed), array.max_items);
    frames.push_back(frame(kValue, item));
    return Step::kRetry;
  };
  switch (top.phase) {
    case kArrayOpen:
      if (byte == ']') {
        if (array.min_items > 0) return Step::kRejected;
        frames.pop_back();
        return Step::kConsumed;
      }
      return begin_item();
    case kArrayValueDone:
      if (byte == ',' && top.a < array.max_items) {
        top.phase = kArrayComma;
        return Step::kConsumed;
      }
      if (byte == ']' && top.a >= array.min_items) {
        frames.pop_back();
        return Step::kConsumed;
      }
      return Step::kRejected;
    case kArrayComma:
      if (byte == ' ') {
        top.phase = kArrayCommaSpace;
        return Step::kConsumed;
      }
      return begin_item();
    case kArrayCommaSpace:
      return begin_item();
    default:
      return Step::kRejected;
  }
}

GrammarMatcher::Step GrammarMatcher::step_string(std::vector<MatchFrame>& frames,
                                                 uint8_t byte) const {
  MatchFrame& top = frames.back();
  const uint32_t min = top.node == kNoNode ? 0 : grammar_.nodes[top.node].min_length;
  const uint32_t max = top.node == kNoNode ? kUnbounded : grammar_.nodes[top.node].max_length;
  const auto character_done = [&]() { top.a = count_one(top.a, min, max); };
  // pending: the continuation bytes due (low byte), and the lead byte while its first
  // continuation is due (high byte), which narrows that one's range (utf8_rules.h).
  if (top.pending > 0) {
    const auto lead = static_cast<uint8_t>(top.pending >> 8);
    const ByteRange range = lead != 0 ? utf8_second_byte(lead) : ByteRange{0x80, 0xBF};
    if (byte < range.low || byte > range.high) return Step::kRejected;
    top.pending = static_cast<uint16_t>((top.pending & 0xFF) - 1);
    if (top.pending == 0) character_done();
    return Step::kConsumed;
  }
  // \u escapes: b holds the first two hex digits' value, and kLowSurrogateDue once a high
  // surrogate (\uD800 to \uDBFF) was read, which a low one (\uDC00 to \uDFFF) must follow: a
  // lone surrogate is not a character, and strict parsers refuse it.
  const bool low_due = (top.b & kLowSurrogateDue) != 0;
  if (top.phase == kStringEscape) {
    if (byte == 'u') {
      top.phase = kStringHexFirst;
      return Step::kConsumed;
    }
    if (low_due || std::strchr("\"\\/bfnrt", byte) == nullptr || byte == 0) {
      return Step::kRejected;
    }
    top.phase = kStringPlain;
    character_done();
    return Step::kConsumed;
  }
  if (top.phase >= kStringHexFirst) {
    if (!is_hex(byte)) return Step::kRejected;
    const uint32_t digit = is_digit(byte) ? byte - '0' : (byte | 0x20) - 'a' + 10;
    if (top.phase < kStringHexFirst + 2) {
      top.b = (top.b & kLowSurrogateDue) | ((top.b & 0xFF) << 4 | digit);
      if (top.phase == kStringHexFirst + 1) {
        const uint32_t lead = top.b & 0xFF;
        const bool low = lead >= 0xDC && lead <= 0xDF;
        if (low != low_due) return Step::kRejected;
      }
    }
    if (++top.phase == kStringHexDone) {
      top.phase = kStringPlain;
      const uint32_t lead = top.b & 0xFF;
      if (lead >= 0xD8 && lead <= 0xDB) {
        top.b = kLowSurrogateDue;  // the character is done with its low half
      } else {
        top.b = 0;
        character_done();
      }
    }
    return Step::kConsumed;
  }
  if (low_due) {
    if (byte != '\\') return Step::kRejected;
    top.phase = kStringEscape;
    return Step::kConsumed;
  }
  if (byte == '"') {
    if (top.a < min) return Step::kRejected;
    frames.pop_back();
    return Step::kConsumed;
  }
  if (max != kUnbounded && top.a >= max) return Step::kRejected;  // no room for a character
  if (byte == '\\') {
    top.phase = kStringEscape;
    return Step::kConsumed;
  }
  if (byte >= 0x20 && byte < 0x80) {
    character_done();
    return Step::kConsumed;
  }
  // Control characters must be escaped; anything else must lead a UTF-8 character.
  const uint8_t due = byte < 0x20 ? 0 : utf8_continuations(byte);
  if (due == 0) return Step::kRejected;
  top.pending = static_cast<uint16_t>(byte << 8 | due);
  return Step::kConsumed;
}

GrammarMatcher::Step GrammarMatcher::step_number(std::vector<MatchFrame>& frames,
                                                 uint8_t byte) const {
  MatchFrame& top = frames.back();
  const GrammarNode& node = grammar_.nodes[top.node];
  const bool integer = node.kind == NodeKind::kInteger;
  if ((integer && node.range.bounded()) || (!integer && node.number.bounded())) {
    const Step step = integer ? step_bounded_integer(top, byte) : step_bounded_number(top, byte);
    if (step == Step::kRetry) frames.pop_back();  // complete and in range: the parent reads on
    return step;
  }
  const auto to = [&](uint8_t phase) {
    top.phase = phase;
    return Step::kConsumed;
  };
  // A complete number that cannot take the byte ends; its parent reads the byte.
  const auto end_here = [&]() {
    frames.pop_back();
    return Step::kRetry;
  };
  const bool exponent = !integer && (byte == 'e' || byte == 'E');
  switch (top.phase) {
    case kNumberSign:
      if (byte == '0') return to(kNumberZero);
      return byte >= '1' && byte <= '9' ? to(kNumberInt) : Step::kRejected;
    case kNumberZero:
    case kNumberInt:
      if (top.phase == kNumberInt && is_digit(byte)) return Step::kConsumed;
      if (!integer && byte == '.') return to(kNumberDot);
      if (exponent) return to(kNumberExp);
      return end_here();
    case kNumberDot:
      return is_digit(byte) ? to(kNumberFraction) : Step::kRejected;
    case kNumberFraction:
      if (is_digit(byte)) return Step::kConsumed;
      if (exponent) return to(kNumberExp);
      return end_here();
    case kNumberExp:
      if (byte == '+' || byte == '-') return to(kNumberExpSign);
      return is_digit(byte) ? to(kNumberExpDigits) : Step::kRejected;
    case kNumberExpSign:
      return is_digit(byte) ? to(kNumberExpDigits) : Step::kRejected;
    case kNumberExpDigits:
      return is_digit(byte) ? Step::kConsumed : end_here();
    default:
      return Step::kRejected;
  }
}

// A bounded integer: a holds the magnitude's low 32 bits, b its high ones; pending says whether
// a '-' was read (kNegative) and, on entry from a value, that no byte was yet (kNothingYet).
// Each digit is taken only if some value that starts so can end in range; the number ends (kRetry,
// its parent reads the byte) only in range.
GrammarMatcher::Step GrammarMatcher::step_bounded_integer(MatchFrame& top, uint8_t byte) const {
  const IntegerRange& range = grammar_.nodes[top.node].range;
  const bool first = (top.pending & kNothingYet) != 0;
  bool negative = (top.pending & kNegative) != 0;
  const uint64_t magnitude = static_cast<uint64_t>(top.b) << 32 | top.a;
  uint8_t phase = top.phase;
  uint64_t next = magnitude;
  if (first && byte == '-') {
    negative = true;
  } else if (first || phase == kNumberSign || phase == kNumberInt) {
    if (!is_digit(byte)) {
      if (first || phase == kNumberSign) return Step::kRejected;
      return range.contains(negative ? -static_cast<__int128>(magnitude) : magnitude)
                 ? Step::kRetry
                 : Step::kRejected;
    }
    const uint64_t digit = byte - '0';
    if (magnitude > (UINT64_MAX - digit) / 10) return Step::kRejected;
    next = magnitude * 10 + digit;
    phase = next == 0 ? kNumberZero : kNumberInt;
  } else {  // kNumberZero: "0" or "-0" takes no more digits
    if (is_digit(byte)) return Step::kRejected;
    return range.contains(0) ? Step::kRetry : Step::kRejected;
  }
  if (!range.reachable(negative, next, phase == kNumberZero)) return Step::kRejected;
  top.phase = first && byte == '-' ? static_cast<uint8_t>(kNumberSign) : phase;
  top.pending = negative ? kNegative : 0;
  top.a = static_cast<uint32_t>(next);
  top.b = static_cast<uint32_t>(next >> 32);
  return Step::kConsumed;
}

// A pattern's automaton reads the byte. In a string ('"' closes it), a byte no match can go on
// with is refused; in raw text the text ends there if it is a match, and the parent reads the
// byte (at the root there is none, and the byte is refused).
GrammarMatcher::Step GrammarMatcher::step_pattern(std::vector<MatchFrame>& frames,
                                                  uint8_t byte) const {
  MatchFrame& top = frames.back();
  const ByteDfa& dfa = pattern_of(top.node);
  if (top.kind == kPatterned && byte == '"') {
    if (!dfa.accepting(top.a)) return Step::kRejected;
    frames.pop_back();
    return Step::kConsumed;
  }
  const uint32_t next = dfa.next(top.a, byte);
  if (next != ByteDfa::kDead) {
    top.a = next;
    return Step::kConsumed;
  }
  if (top.kind == kRegexText && dfa.accepting(top.a)) {
    frames.pop_back();
    return Step::kRetry;
  }
  return Step::kRejected;
}

// A repeat's next item. The last one allowed takes the repeat's place, as a sequence's last part
// does: an optional tail (`list ::= item ("," list)?`) keeps a flat stack too.
void GrammarMatcher::begin_item(std::vector<MatchFrame>& frames) const {
  MatchFrame& top = frames.back();
  const GrammarNode& repeat = grammar_.nodes[top.node];
  if (repeat.max_items != kUnbounded && top.a + 1 >= repeat.max_items) {
    top = frame(kValue, repeat.items);
    return;
  }
  top.a = count_one(top.a, repeat.min_items, repeat.max_items);
  frames.push_back(frame(kValue, repeat.items));
}

// A sequence pushes its parts one at a time. The last takes the sequence's own place: nothing of
// the sequence is left after it, and a grammar's right recursion (`list ::= item ("," list)?`)
// keeps a flat stack.
GrammarMatcher::Step GrammarMatcher::step_sequence(std::vector<MatchFrame>& frames) const {
  MatchFrame& top = frames.back();
  const std::vector<uint32_t>& parts = grammar_.nodes[top.node].parts;
  if (top.a >= parts.size()) {
    frames.pop_back();  // the empty sequence
    return Step::kRetry;
  }
  const uint32_t part = parts[top.a];
  if (top.a + 1 == parts.size()) {
    top = frame(kValue, part);
    return Step::kRetry;
  }
  ++top.a;
  frames.push_back(frame(kValue, part));
  return Step::kRetry;
}

const ByteDfa& GrammarMatcher::pattern_of(uint32_t node) const {
  return grammar_.patterns[grammar_.nodes[node].pattern];
}

// A bounded number (number_range.h): no exponent. In the integer part a and b hold the
// magnitude as for bounded integers; at '.' a becomes the fraction digits allowed and b 0, and
// pending holds how the fraction digits so far compare with the sign's two bounds
// (kLowOrderShift, kHighOrderShift) and how many there were (kDigitsShift).
GrammarMatcher::Step GrammarMatcher::step_bounded_number(MatchFrame& top, uint8_t byte) const {
  const NumberRange& range = grammar_.nodes[top.node].number;
  const bool first = (top.pending & kNothingYet) != 0;
  const bool negative = (top.pending & kNegative) != 0;
  const uint64_t magnitude = static_cast<uint64_t>(top.b) << 32 | top.a;
  const MagnitudeRange& bounds = range.of(negative);
  const auto hold = [&](uint64_t value, uint8_t phase) {
    top.a = static_cast<uint32_t>(value);
    top.b = static_cast<uint32_t>(value >> 32);
    top.phase = phase;
    top.pending = negative ? kNegative : 0;
    return Step::kConsumed;
  };
  if (first && byte == '-') {
    if (!range.reachable_integer(true, 0, false, true)) return Step::kRejected;
    top.pending = kNegative;
    top.phase = kNumberSign;
    return Step::kConsumed;
  }
  const uint8_t phase = first ? static_cast<uint8_t>(kNumberSign) : top.phase;
  switch (phase) {
    case kNumberSign:
    case kNumberInt: {
      if (is_digit(byte)) {
        const uint64_t digit = byte - '0';
        const uint64_t base = phase == kNumberSign ? 0 : magnitude;
        if (base > (INT64_MAX - digit) / 10) return Step::kRejected;  // held below 2^63
        const uint64_t next = base * 10 + digit;
        const bool zero = phase == kNumberSign && digit == 0;
        if (!range.reachable_integer(negative, next, zero, false)) return Step::kRejected;
        return hold(next, zero ? kNumberZero : kNumberInt);
      }
      if (phase == kNumberSign) return Step::kRejected;
      [[fallthrough]];
    }
    case kNumberZero: {
      if (byte == '.') {
        // A missing bound compares as passed, so that its order never tells states apart.
        const Order low =
            bounds.has_low ? NumberRange::start_fraction(magnitude, bounds.low) : Order::kGreater;
        const Order high =
            bounds.has_high ? NumberRange::start_fraction(magnitude, bounds.high) : Order::kLess;
        if (!range.reachable_fraction(negative, low, high, 0)) return Step::kRejected;
        hold(range.max_fraction_digits(magnitude), kNumberDot);  // a: the digits allowed
        top.pending |= static_cast<uint16_t>(static_cast<uint16_t>(low) << kLowOrderShift |
                                             static_cast<uint16_t>(high) << kHighOrderShift);
        return Step::kConsumed;
      }
      if (is_digit(byte)) return Step::kRejected;  // "0" takes no more digits
      return range.contains_integer(negative, magnitude) ? Step::kRetry : Step::kRejected;
    }
    case kNumberDot:
    case kNumberFraction: {
      const auto low = static_cast<Order>(top.pending >> kLowOrderShift & 3);
      const auto high = static_cast<Order>(top.pending >> kHighOrderShift & 3);
      const uint32_t digits = top.pending >> kDigitsShift;
      if (!is_digit(byte)) {
        if (phase == kNumberDot) return Step::kRejected;
        return range.contains_fraction(negative, low, high, digits) ? Step::kRetry
                                                                    : Step::kRejected;
      }
      const auto digit = static_cast<uint8_t>(byte - '0');
      const Order next_low = NumberRange::next_digit(low, digit, digits, bounds.low);
      const Order next_high = NumberRange::next_digit(high, digit, digits, bounds.high);
      const uint32_t next_digits = digits + 1;
      if (next_digits > top.a) return Step::kRejected;
      // At the last digit allowed the number must be in range as it is.
      const bool fits = next_digits == top.a
                            ? range.contains_fraction(negative, next_low, next_high, next_digits)
                            : range.reachable_fraction(negative, next_low, next_high, next_digits);
      if (!fits) return Step::kRejected;
      top.phase = kNumberFraction;
      top.pending = static_cast<uint16_t>(
          (negative ? kNegative : 0) | static_cast<uint16_t>(next_low) << kLowOrderShift |
          static_cast<uint16_t>(next_high) << kHighOrderShift | next_digits << kDigitsShift);
      return Step::kConsumed;
    }
    default:
      return Step::kRejected;
  }
}

bool GrammarMatcher::bounded_number_in_range(const MatchFrame& frame) const {
  const NumberRange& range = grammar_.nodes[frame.node].number;
  const bool negative = (frame.pending & kNegative) != 0;
  if (frame.phase == kNumberZero || frame.phase == kNumberInt) {
    return range.contains_integer(negative, static_cast<uint64_t>(frame.b) << 32 | frame.a);
  }
  if (frame.phase != kNumberFraction) return false;
  return range.contains_fraction(negative, static_cast<Order>(frame.pending >> kLowOrderShift & 3),
                                 static_cast<Order>(frame.pending >> kHighOrderShift & 3),
                                 frame.pending >> kDigitsShift);
}

GrammarMatcher::Step GrammarMatcher::step_literal(std::vector<MatchFrame>& frames, size_t begin,
                                                  uint8_t byte) const {
  // An item of an array of unique items: the values the array has written are skipped.
  MatchFrame* unique_array = nullptr;
  if (frames.size() - begin >= 2) {
    MatchFrame& parent = frames[frames.size() - 2];
    if (parent.kind == kArray && grammar_.nodes[parent.node].unique_items) unique_array = &parent;
  }
  const uint32_t written = unique_array != nullptr ? unique_array->b : 0;
  MatchFrame& top = frames.back();
  const std::vector<std::string>& literals = grammar_.nodes[top.node].literals;
  const std::string& matched = literals[top.a];
  const uint32_t read = top.b;
  // Sorted: the first literal that is not below (bytes read + byte) is the one to continue with,
  // if any does.
  const auto below = [&](const std::string& literal, uint8_t next) {
    const int order = literal.compare(0, read, matched, 0, read);
    if (order != 0) return order < 0;
    return literal.size() <= read || static_cast<uint8_t>(literal[read]) < next;
  };
  const auto continues = [&](std::vector<std::string>::const_iterator literal) {
    return literal != literals.end() && literal->size() > read &&
           literal->compare(0, read, matched, 0, read) == 0 &&
           static_cast<uint8_t>((*literal)[read]) == byte;
  };
  auto found = std::lower_bound(literals.begin() + top.a, literals.end(), byte, below);
  // The literals that go on with the byte are next to each other: the first one not written.
  // (Only under unique items, whose values are at most 32: the shift stays in range.)
  while (unique_array != nullptr && continues(found) &&
         ((written >> (found - literals.begin())) & 1u) != 0) {
    ++found;
  }
  if (continues(found)) {
    top.a = static_cast<uint32_t>(found - literals.begin());
    ++top.b;
    return Step::kConsumed;
  }
  if (matched.size() != read) return Step::kRejected;
  if (unique_array != nullptr) unique_array->b |= 1u << top.a;
  frames.pop_back();  // a whole literal: the parent reads the byte
  return Step::kRetry;
}

}  // namespace headway::serving::guided
