#include "number_range.h"

#include <algorithm>

namespace headway::serving::guided {

namespace {

// An integer magnitude against a bound's: kEqual only when the bound has no fraction.
Order compare(unsigned __int128 value, const DecimalMagnitude& bound) {
  if (value < bound.integer) return Order::kLess;
  if (value > bound.integer) return Order::kGreater;
  return bound.fraction.empty() ? Order::kEqual : Order::kLess;
}

// Whether some magnitude in [from, to) (integers; to exclusive) is in `range`.
bool meets(const MagnitudeRange& range, unsigned __int128 from, unsigned __int128 to) {
  if (range.has_low && compare(to, range.low) != Order::kGreater) return false;
  if (range.has_high) {
    const Order order = compare(from, range.high);
    if (order == Order::kGreater || (range.high_exclusive && order == Order::kEqual)) return false;
  }
  return true;
}

}  // namespace

bool NumberRange::reachable_integer(bool is_negative, uint64_t magnitude, bool closed,
                                    bool bare) const {
  const MagnitudeRange& range = of(is_negative);
  if (!range.possible) return false;
  if (bare) return meets(range, 0, static_cast<unsigned __int128>(1) << 63);
  if (closed) return meets(range, 0, 1);  // "0" and its fractions
  // k more integer digits (and any fraction) give magnitudes [m * 10^k, (m + 1) * 10^k); the
  // integer part stays below 2^63.
  constexpr unsigned __int128 kLimit = static_cast<unsigned __int128>(1) << 63;
  unsigned __int128 scale = 1;
  for (int k = 0; k <= 19; ++k, scale *= 10) {
    const unsigned __int128 from = static_cast<unsigned __int128>(magnitude) * scale;
    if (from >= kLimit) break;
    if (meets(range, from, std::min(from + scale, kLimit))) return true;
  }
  return false;
}

bool NumberRange::contains_integer(bool is_negative, uint64_t magnitude) const {
  const MagnitudeRange& range = of(is_negative);
  if (!range.possible) return false;
  if (range.has_low) {
    const Order order = compare(magnitude, range.low);
    if (order == Order::kLess || (range.low_exclusive && order == Order::kEqual)) return false;
  }
  if (range.has_high) {
    const Order order = compare(magnitude, range.high);
    if (order == Order::kGreater || (range.high_exclusive && order == Order::kEqual)) return false;
  }
  return true;
}

uint32_t NumberRange::max_fraction_digits(uint64_t magnitude) const {
  uint32_t integer_digits = 0;
  for (uint64_t m = magnitude; m > 0; m /= 10) ++integer_digits;
  const uint32_t significant =
      integer_digits >= kSignificantDigits ? 0 : kSignificantDigits - integer_digits;
  return std::max(significant, fraction_digits + 1);
}

Order NumberRange::start_fraction(uint64_t magnitude, const DecimalMagnitude& bound) {
  if (magnitude < bound.integer) return Order::kLess;
  if (magnitude > bound.integer) return Order::kGreater;
  return Order::kEqual;
}

Order NumberRange::next_digit(Order order, uint8_t digit, uint32_t position,
                              const DecimalMagnitude& bound) {
  if (order != Order::kEqual) return order;
  const uint8_t bound_digit =
      position < bound.fraction.size() ? static_cast<uint8_t>(bound.fraction[position] - '0') : 0;
  if (digit < bound_digit) return Order::kLess;
  if (digit > bound_digit) return Order::kGreater;
  return Order::kEqual;
}

// The number so far is P (its digits), and more digits give [P, P + 10^-digits). kEqual with
// `digits` at least the bound's fraction length means P is the bound; kEqual short of it, that
// the bound lies in [P, P + 10^-digits).
bool NumberRange::reachable_fraction(bool is_negative, Order low, Order high,
                                     uint32_t digits) const {
  const MagnitudeRange& range = of(is_negative);
  if (!range.possible) return false;
  if (range.has_low && low == Order::kLess) return false;
  if (range.has_high) {
    if (high == Order::kGreater) return false;
    const bool at_bound = high == Order::kEqual && digits >= range.high.fraction.size();
    if (at_bound && range.high_exclusive) return false;  // more digits only add
  }
  return true;
}

bool NumberRange::contains_fraction(bool is_negative, Order low, Order high,
                                    uint32_t digits) const {
  const MagnitudeRange& range = of(is_negative);
  if (!range.possible) return false;
  if (range.has_low) {
    const bool at_bound = low == Order::kEqual && digits >= range.low.fraction.size();
    if (!(low == Order::kGreater || (at_bound && !range.low_exclusive))) return false;
  }
  if (range.has_high) {
    const bool at_bound = high == Order::kEqual && digits >= range.high.fraction.size();
    if (!(high == Order::kLess || (high == Order::kEqual && !at_bound) ||
          (at_bound && !range.high_exclusive))) {
      return false;
    }
  }
  return true;
}

}  // namespace headway::serving::guided
