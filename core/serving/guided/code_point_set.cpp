#include "code_point_set.h"

#include <algorithm>

namespace headway::serving::guided {

namespace {

constexpr uint32_t kSurrogateLow = 0xD800;
constexpr uint32_t kSurrogateHigh = 0xDFFF;

// The last code point of each UTF-8 length: 1 to 4 bytes.
constexpr uint32_t kLengthEnds[4] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};

uint8_t encode(uint32_t c, uint8_t out[4]) {
  if (c <= 0x7F) {
    out[0] = static_cast<uint8_t>(c);
    return 1;
  }
  if (c <= 0x7FF) {
    out[0] = static_cast<uint8_t>(0xC0 | c >> 6);
    out[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 2;
  }
  if (c <= 0xFFFF) {
    out[0] = static_cast<uint8_t>(0xE0 | c >> 12);
    out[1] = static_cast<uint8_t>(0x80 | (c >> 6 & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | c >> 18);
  out[1] = static_cast<uint8_t>(0x80 | (c >> 12 & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | (c >> 6 & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
  return 4;
}

// [low, high] of one UTF-8 length, split until every byte position ranges independently: then
// the characters of the range are exactly the byte strings between low's and high's bytes.
void split_same_length(uint32_t low, uint32_t high, std::vector<Utf8Sequence>& out) {
  struct Pending {
    uint32_t low;
    uint32_t high;
  };
  std::vector<Pending> todo{{low, high}};
  while (!todo.empty()) {
    const Pending range = todo.back();
    todo.pop_back();
    bool split = false;
    for (uint32_t bits = 6; bits < 24 && !split; bits += 6) {
      // The low `bits` bits are the trailing bytes; if low and high differ above them, the
      // trailing bytes must run over their whole span, else the range is cut there.
      const uint32_t mask = (1u << bits) - 1;
      if ((range.low & ~mask) == (range.high & ~mask)) continue;
      if ((range.low & mask) != 0) {
        todo.push_back({(range.low | mask) + 1, range.high});
        todo.push_back({range.low, range.low | mask});
        split = true;
      } else if ((range.high & mask) != mask) {
        todo.push_back({range.high & ~mask, range.high});
        todo.push_back({range.low, (range.high & ~mask) - 1});
        split = true;
      }
    }
    if (split) continue;
    Utf8Sequence sequence;
    sequence.length = encode(range.low, sequence.low);
    encode(range.high, sequence.high);
    out.push_back(sequence);
  }
}

}  // namespace

CodePointSet CodePointSet::all() { return range(0, kMaxCodePoint); }

CodePointSet CodePointSet::range(uint32_t low, uint32_t high) {
  CodePointSet set;
  set.add(low, high);
  return set;
}

void CodePointSet::add(uint32_t low, uint32_t high) {
  // Surrogates are not characters: a range over them keeps only its parts outside.
  if (low <= kSurrogateHigh && high >= kSurrogateLow) {
    if (low < kSurrogateLow) add(low, kSurrogateLow - 1);
    if (high > kSurrogateHigh) add(kSurrogateHigh + 1, high);
    return;
  }
  // Merge with every range it overlaps or touches.
  auto first = std::lower_bound(ranges_.begin(), ranges_.end(), low,
                                [](const CodePointRange& r, uint32_t v) { return r.high + 1 < v; });
  auto last = first;
  while (last != ranges_.end() && last->low <= high + 1) {
    low = std::min(low, last->low);
    high = std::max(high, last->high);
    ++last;
  }
  first = ranges_.erase(first, last);
  ranges_.insert(first, {low, high});
}

void CodePointSet::add(const CodePointSet& other) {
  for (const CodePointRange& range : other.ranges_) add(range.low, range.high);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const CodePointRange& range : ranges_) {
    if (range.low > next) out.add(next, range.low - 1);
    next = range.high + 1;
  }
  if (next <= kMaxCodePoint) out.add(next, kMaxCodePoint);
  return out;
}

std::vector<Utf8Sequence> utf8_sequences(const CodePointSet& set) {
  std::vector<Utf8Sequence> out;
  for (const CodePointRange& range : set.ranges()) {
    uint32_t low = range.low;
    for (const uint32_t end : kLengthEnds) {
      if (low > range.high) break;
      if (low > end) continue;
      const uint32_t high = std::min(range.high, end);
      split_same_length(low, high, out);
      low = high + 1;
    }
  }
  return out;
}

}  // namespace headway::serving::guided
