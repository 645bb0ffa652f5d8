#include "headway/core/percentiles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "headway/core/error.h"

namespace headway::core {

double percentile_sorted(std::span<const double> sorted, double p) {
  if (!(p >= 0 && p <= 100)) {
    throw Error("percentile: p must be in [0, 100] (got " + std::to_string(p) + ")");
  }
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double h = static_cast<double>(sorted.size() - 1) * p / 100.0;
  const auto lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double frac = h - static_cast<double>(lo);
  // An exact rank, or two equal neighbours, is that value: interpolating toward an infinite
  // neighbour (an unfinished request) would give 0 * inf = NaN, or inf - inf = NaN.
  if (frac == 0 || sorted[lo] == sorted[lo + 1]) return sorted[lo];
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, p);
}

}  // namespace headway::core
