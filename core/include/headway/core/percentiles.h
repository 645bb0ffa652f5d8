// Percentiles of latency samples, by LINEAR INTERPOLATION between the closest ranks (the method
// numpy.percentile uses by default, "type 7" in Hyndman & Fan): for n sorted values x[0..n-1] and
// p in [0, 100], h = (n - 1) * p / 100 and the result is x[floor(h)] + (h - floor(h)) *
// (x[floor(h) + 1] - x[floor(h)]). So p0 is the minimum, p100 the maximum, and the p50 of an even
// count is the mean of the two middle values. Matching numpy keeps Headway's figures comparable
// with vLLM's and SGLang's benchmark scripts.
//
// All functions are pure and thread-safe. NaN values in the input are not allowed (callers drop
// missing measurements first); an empty input gives NaN. +inf is allowed (an unfinished request's
// latency): a percentile between a finite and an infinite rank is infinite, one at the finite
// rank exactly is finite.
#pragma once

#include <span>
#include <vector>

namespace headway::core {

// `sorted` must be in ascending order. Throws headway::core::Error when p is outside [0, 100].
double percentile_sorted(std::span<const double> sorted, double p);

// Sorts its own copy of `values`.
double percentile(std::vector<double> values, double p);

}  // namespace headway::core
