// One step of the 64-bit hash the prefix cache names its blocks with and the router prefix hashes
// chain (route_prefix.cpp): a boost::hash_combine-style mix followed by a multiply and xor-shift
// from splitmix64's finaliser, so that one id more or less changes about half the bits.
// Threading: a pure function.
#pragma once

#include <cstdint>

namespace headway::core {

inline uint64_t hash_mix(uint64_t h, uint64_t value) {
  h ^= value + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

}  // namespace headway::core
