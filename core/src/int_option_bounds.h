// An integer option's value against its schema's bounds, which abi.h gives as doubles: compared as
// integers, since as a double 2^62 + 1 is 2^62 and would pass a maximum of 2^62. For the options a
// deployment sets (plugin_options.cpp) and a plugin's defaults (plugin_registry.cpp).
// Threading: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

namespace headway::core {

inline constexpr double kTwoTo63 = 9223372036854775808.0;

// v < min, for a finite or infinite min (NaN bounds are refused when the schema is read).
inline bool int_below(int64_t v, double min) {
  if (min >= kTwoTo63) return true;
  if (min < -kTwoTo63) return false;
  return v < static_cast<int64_t>(std::ceil(min));
}

// v > max, likewise.
inline bool int_above(int64_t v, double max) {
  if (max >= kTwoTo63) return false;
  if (max < -kTwoTo63) return true;
  return v > static_cast<int64_t>(std::floor(max));
}

}  // namespace headway::core
