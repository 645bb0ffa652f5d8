// The bounds of a JSON schema integer (minimum, maximum and their exclusive forms, made
// inclusive, and multipleOf), and whether the digits written so far can still end inside them,
// which is how the matcher refuses a digit early rather than at the number's end.
//
// Threading: plain values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace headway::serving::guided {

struct IntegerRange {
  int64_t low = std::numeric_limits<int64_t>::min();
  int64_t high = std::numeric_limits<int64_t>::max();

  // The schema gave a bound (even one 64 bits cannot pass): the integer is checked against these
  // and so held to 64 bits. Else any integer, of any length.
  bool enforced = false;

  // multipleOf: the integer is a multiple of this (1: any).
  uint64_t multiple = 1;

  bool bounded() const { return enforced; }
  bool contains(__int128 value) const {
    return value >= low && value <= high && value % static_cast<__int128>(multiple) == 0;
  }
  // Whether [from, to], within the bounds, holds a multiple.
  bool holds_multiple(__int128 from, __int128 to) const {
    from = std::max<__int128>(from, low);
    to = std::min<__int128>(to, high);
    if (from > to) return false;
    const auto m = static_cast<__int128>(multiple);
    const __int128 first = from >= 0 ? (from + m - 1) / m * m : -((-from) / m) * m;  // ceiling
    return first <= to;
  }

  // Whether an integer written as [-]digits, `magnitude` so far, can end in range: as it is
  // (`closed`: a leading 0 takes no more digits) or after more digits. `negative` with
  // magnitude 0 and not closed: only the sign was written.
  bool reachable(bool negative, uint64_t magnitude, bool closed) const {
    const auto value = [&](__int128 m) { return negative ? -m : m; };
    if (closed) return contains(value(magnitude));
    if (magnitude == 0) return holds_multiple(low, 0);  // after '-': any value <= 0 ("-0" is 0)
    // Appending k digits gives magnitudes [m * 10^k, m * 10^k + 10^k - 1]; past 2^63 nothing is
    // in range.
    __int128 scale = 1;
    for (int k = 0; k <= 19; ++k, scale *= 10) {
      const __int128 first = static_cast<__int128>(magnitude) * scale;
      if (first > (static_cast<__int128>(1) << 63)) break;
      const __int128 last = first + scale - 1;
      const __int128 from = negative ? -last : first;
      const __int128 to = negative ? -first : last;
      if (holds_multiple(from, to)) return true;
    }
    return false;
  }
};

}  // namespace headway::serving::guided
