#include "schema_number_bounds.h"

#include <fmt/format.h>
#include <headway/serving/service_error.h>

#include <algorithm>
#include <optional>

namespace headway::serving::guided {

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& path, const std::string& message) {
  throw ServiceError(ErrorCode::kInvalidArgument, fmt::format("{}: {}", path, message), path);
}

struct Bound {
  bool negative = false;  // never with a zero magnitude
  DecimalMagnitude magnitude;
  bool exclusive = false;
  bool huge = false;  // 2^63 or more in magnitude: past every number a bounded one writes
  bool zero() const { return magnitude.integer == 0 && magnitude.fraction.empty(); }
};

// -1, 0, 1 as a < b, a == b, a > b.
int compare_magnitudes(const DecimalMagnitude& a, const DecimalMagnitude& b) {
  if (a.integer != b.integer) return a.integer < b.integer ? -1 : 1;
  // No trailing zeros: position by position, and a fraction that runs on is the larger.
  const int order = a.fraction.compare(b.fraction);
  return order < 0 ? -1 : order > 0 ? 1 : 0;
}

int compare_values(const Bound& a, const Bound& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int magnitudes = compare_magnitudes(a.magnitude, b.magnitude);
  return a.negative ? -magnitudes : magnitudes;
}

// The decimal a JSON number's text gives: integers exactly, others from the shortest text that
// reads back as the same double.
Bound bound_of(const Json& value, const std::string& at) {
  Bound out;
  std::string text =
      value.is_number_float() ? fmt::format("{}", value.get<double>()) : value.dump();
  if (!text.empty() && text[0] == '-') {
    out.negative = true;
    text.erase(0, 1);
  }
  if (text == "inf" || text == "nan") refuse(at, "must be a finite number");
  int exponent = 0;
  if (const size_t e = text.find_first_of("eE"); e != std::string::npos) {
    exponent = std::stoi(text.substr(e + 1));
    text.resize(e);
  }
  std::string digits = text;
  int point = static_cast<int>(digits.size());
  if (const size_t dot = digits.find('.'); dot != std::string::npos) {
    point = static_cast<int>(dot);
    digits.erase(dot, 1);
  }
  point += exponent;
  // digits with the point after `point` of them: pad with zeros on the side that needs them.
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<int>(digits.size())) digits.append(point - digits.size(), '0');
  std::string integer = digits.substr(0, static_cast<size_t>(point));
  std::string fraction = digits.substr(static_cast<size_t>(point));
  integer.erase(0, std::min(integer.find_first_not_of('0'), integer.size()));
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  if (integer.size() > 19 || (integer.size() == 19 && integer >= "9223372036854775808")) {
    out.huge = true;
    return out;
  }
  if (fraction.size() > kMaxBoundFractionDigits) {
    refuse(at, fmt::format("guided decoding takes number bounds of at most {} fraction digits",
                           kMaxBoundFractionDigits));
  }
  out.magnitude.integer = integer.empty() ? 0 : std::stoull(integer);
  out.magnitude.fraction = std::move(fraction);
  if (out.zero()) out.negative = false;
  return out;
}

}  // namespace

NumberRange number_range_of(const Json& schema, const std::string& path) {
  NumberRange range;
  const auto read = [&](const char* keyword, bool beside_draft4) -> std::optional<Bound> {
    const auto it = schema.find(keyword);
    if (it == schema.end() || (beside_draft4 && it->is_boolean())) return std::nullopt;
    if (!it->is_number()) {
      refuse(path + "." + keyword,
             beside_draft4 ? "must be a number (or, beside minimum or maximum, a boolean)"
                           : "must be a number");
    }
    range.enforced = true;
    return bound_of(*it, path + "." + keyword);
  };
  const auto draft4_exclusive = [&](const char* keyword) {
    const auto it = schema.find(keyword);
    return it != schema.end() && it->is_boolean() && it->get<bool>();
  };
  // The tighter of minimum and exclusiveMinimum (and of the maxima); at a tie, the exclusive one.
  const auto tighter = [](std::optional<Bound> a, std::optional<Bound> b, int sign) {
    if (!a) return b;
    if (!b) return a;
    const int order = compare_values(*a, *b) * sign;
    if (order == 0) return a->exclusive ? a : b;
    return order > 0 ? a : b;
  };
  std::optional<Bound> low = read("minimum", false);
  if (low) low->exclusive = draft4_exclusive("exclusiveMinimum");
  std::optional<Bound> high = read("maximum", false);
  if (high) high->exclusive = draft4_exclusive("exclusiveMaximum");
  std::optional<Bound> exclusive_low = read("exclusiveMinimum", true);
  if (exclusive_low) exclusive_low->exclusive = true;
  std::optional<Bound> exclusive_high = read("exclusiveMaximum", true);
  if (exclusive_high) exclusive_high->exclusive = true;
  // A bounded number's integer part is held below 2^63, so a bound past that either leaves
  // nothing (refused) or says nothing more.
  const auto reach = [&](std::optional<Bound>& bound, bool is_low, const char* keyword) {
    if (!bound || !bound->huge) return;
    if (bound->negative != is_low) {
      refuse(path + "." + keyword, is_low ? "no number below 2^63 in magnitude is that large"
                                          : "no number below 2^63 in magnitude is that small");
    }
    bound.reset();
  };
  reach(low, true, "minimum");
  reach(exclusive_low, true, "exclusiveMinimum");
  reach(high, false, "maximum");
  reach(exclusive_high, false, "exclusiveMaximum");
  low = tighter(low, exclusive_low, 1);
  high = tighter(high, exclusive_high, -1);

  // Per sign, the magnitudes the bounds leave (value = m, or value = -m).
  MagnitudeRange& positive = range.positive;
  MagnitudeRange& negative = range.negative;
  const auto set_low = [](MagnitudeRange& r, const DecimalMagnitude& m, bool exclusive) {
    r.has_low = true;
    r.low = m;
    r.low_exclusive = exclusive;
  };
  const auto set_high = [](MagnitudeRange& r, const DecimalMagnitude& m, bool exclusive) {
    r.has_high = true;
    r.high = m;
    r.high_exclusive = exclusive;
  };
  if (low) {
    if (low->zero()) {
      if (low->exclusive) {
        set_low(positive, {}, true);  // m > 0
        negative.possible = false;    // -m > 0
      } else {
        set_high(negative, {}, false);  // -m >= 0: only -0
      }
    } else if (low->negative) {
      set_high(negative, low->magnitude, low->exclusive);  // -m >= -L: m <= L
    } else {
      set_low(positive, low->magnitude, low->exclusive);
      negative.possible = false;
    }
  }
  if (high) {
    if (high->zero()) {
      if (high->exclusive) {
        positive.possible = false;    // m < 0
        set_low(negative, {}, true);  // -m < 0: m > 0
      } else {
        set_high(positive, {}, false);  // m <= 0: only 0
      }
    } else if (high->negative) {
      positive.possible = false;
      set_low(negative, high->magnitude, high->exclusive);  // -m <= -H: m >= H
    } else {
      set_high(positive, high->magnitude, high->exclusive);
    }
  }
  for (MagnitudeRange* r : {&positive, &negative}) {
    if (!r->possible || !r->has_low || !r->has_high) continue;
    const int order = compare_magnitudes(r->low, r->high);
    if (order > 0 || (order == 0 && (r->low_exclusive || r->high_exclusive))) r->possible = false;
  }
  if (!positive.possible && !negative.possible) {
    refuse(path + (schema.contains("minimum") ? ".minimum" : ".exclusiveMinimum"),
           "no number lies between the bounds");
  }
  for (const MagnitudeRange* r : {&positive, &negative}) {
    range.fraction_digits =
        std::max({range.fraction_digits, static_cast<uint32_t>(r->low.fraction.size()),
                  static_cast<uint32_t>(r->high.fraction.size())});
  }
  return range;
}

}  // namespace headway::serving::guided
