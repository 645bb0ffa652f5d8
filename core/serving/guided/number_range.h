// The bounds of a JSON schema number (minimum, maximum and their exclusive forms), and whether the
// digits written so far can still end inside them: the matcher refuses a digit as soon as no
// number that starts so is in range, as it does for integers (integer_range.h).
//
// A bounded number is written without an exponent, so its value is sign, integer digits and
// fraction digits. Each sign has its own range of magnitudes (with minimum -2.5 and maximum 10:
// positive magnitudes up to 10, negative ones up to 2.5). The integer part is held exactly, and
// below 2^63 (as a bounded integer's); the fraction digits are not held, only how they compare
// so far with each bound's fraction (an Order), which is all that decides the rest.
//
// Threading: plain values.
#pragma once

#include <cstdint>
#include <string>

namespace headway::serving::guided {

// A bound's magnitude: integer + 0.fraction; `fraction` holds its digits, without trailing zeros.
struct DecimalMagnitude {
  uint64_t integer = 0;
  std::string fraction;
};

// One sign's magnitudes: [low, high], each end optional and maybe exclusive.
struct MagnitudeRange {
  bool possible = true;  // false: no number of this sign is in range
  bool has_low = false;
  bool low_exclusive = false;
  DecimalMagnitude low;
  bool has_high = false;
  bool high_exclusive = false;
  DecimalMagnitude high;
};

// How a number's digits so far compare with a bound's, position by position.
enum class Order : uint8_t { kLess = 0, kEqual = 1, kGreater = 2 };

struct NumberRange {
  bool enforced = false;  // the schema gave a bound
  MagnitudeRange positive;
  MagnitudeRange negative;
  // Fraction digits past this many compare with zeros only (the longest bound's fraction).
  uint32_t fraction_digits = 0;

  bool bounded() const { return enforced; }

  // The fraction digits a number of integer part `magnitude` may have: as many as keep it to 15
  // significant digits, so that a validator that reads it as a double (pydantic, Python's
  // jsonschema) compares it with the bounds as this does (0.09999999999999999999 is 0.1 as a
  // double), and always one more than the bounds' fractions, which reaching them may need.
  // It also keeps a model from writing fraction digits without end.
  static constexpr uint32_t kSignificantDigits = 15;
  uint32_t max_fraction_digits(uint64_t magnitude) const;
  const MagnitudeRange& of(bool is_negative) const { return is_negative ? negative : positive; }

  // Integer digits so far, `magnitude` (`closed`: a lone 0, which takes no more digits; `bare`:
  // no digit yet, after '-' or at the start): can more digits, a fraction, or nothing more end
  // in range?
  bool reachable_integer(bool is_negative, uint64_t magnitude, bool closed, bool bare) const;
  // Whether the integer `magnitude` itself is in range.
  bool contains_integer(bool is_negative, uint64_t magnitude) const;

  // At '.': how the integer digits compare with `bound`'s (kEqual: the same integer part).
  static Order start_fraction(uint64_t magnitude, const DecimalMagnitude& bound);
  // After fraction digit `digit` at position `position` (0 first).
  static Order next_digit(Order order, uint8_t digit, uint32_t position,
                          const DecimalMagnitude& bound);
  // `digits` fraction digits read, comparing `low` and `high` with the sign's bounds: can the
  // number end in range (as it is or after more digits), or is it in range as it is?
  bool reachable_fraction(bool is_negative, Order low, Order high, uint32_t digits) const;
  bool contains_fraction(bool is_negative, Order low, Order high, uint32_t digits) const;
};

}  // namespace headway::serving::guided
