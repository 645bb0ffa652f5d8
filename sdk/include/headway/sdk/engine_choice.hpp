// Helpers for routers: choosing the least-loaded engine among those that qualify. Header-only;
// plugin side. Not thread-safe by themselves (a router instance is called from one thread).
#pragma once

#include <headway/abi.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace headway::sdk {

// Picks the engine with the smallest key(engine) among those for which eligible(engine) holds,
// scanning from a rotating start so that ties go round-robin. Returns engines.size() when none
// qualifies. `cursor` is the router's own state; it advances past each pick.
template <class Eligible, class Key>
size_t pick_least_loaded(std::span<const hw_engine_load> engines, size_t& cursor,
                         Eligible&& eligible, Key&& key) {
  const size_t n = engines.size();
  size_t best = n;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (cursor + k) % n;
    if (!eligible(engines[i])) continue;
    if (best == n || key(engines[i]) < key(engines[best])) best = i;
  }
  if (best != n) cursor = (best + 1) % n;
  return best;
}

// The usual measure of load: prompt tokens still to prefill plus output tokens still to generate.
inline uint64_t outstanding_tokens(const hw_engine_load& e) { return e.outstanding_tokens; }

}  // namespace headway::sdk
