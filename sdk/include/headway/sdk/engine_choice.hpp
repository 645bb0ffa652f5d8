// Helpers for routers: choosing the least-loaded engine among those that qualify, and checking at
// create that a router of mixed engines has some. Header-only; plugin side. Not thread-safe by
// themselves (a router instance is called from one thread).
#pragma once

#include <headway/abi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <headway/sdk/host.hpp>
#include <headway/sdk/status.hpp>
#include <span>
#include <string>
#include <string_view>

namespace headway::sdk {

// For a router that places whole requests on mixed engines only (as least_loaded does), in its
// constructor: throws Error(HW_INVALID_ARGUMENT) when the deployment has no mixed engine (every
// request would be refused), and logs a warning naming the prefill and decode engines beside mixed
// ones, which will take nothing (an operator who left the router out of a file with decode engines
// should hear it).
inline void check_mixed_engines(const Host& host, std::span<const hw_engine_load> engines,
                                std::string_view router) {
  const std::string name(router);
  if (engines.empty()) throw Error(HW_INVALID_ARGUMENT, "no engines to route to");
  const auto has_role = [&](int32_t role) {
    return std::any_of(engines.begin(), engines.end(),
                       [role](const hw_engine_load& e) { return e.role == role; });
  };
  if (!has_role(HW_ENGINE_ROLE_MIXED)) {
    throw Error(HW_INVALID_ARGUMENT,
                "router '" + name +
                    "' places requests on mixed engines, and the deployment's are all prefill or "
                    "decode engines (use router 'disaggregated' for them" +
                    (has_role(HW_ENGINE_ROLE_PREFILL)
                         ? ")"
                         : ", with local_prefill_max_tokens > 0: there is no prefill engine)"));
  }
  std::string idle;
  for (const hw_engine_load& e : engines) {
    if (e.role == HW_ENGINE_ROLE_MIXED) continue;
    idle += (idle.empty() ? "" : ", ") + std::to_string(e.engine_index);
  }
  if (!idle.empty()) {
    host.log(HW_LOG_WARN,
             "router '" + name + "' places requests on mixed engines only: engine(s) " + idle +
                 " (prefill or decode) will take none (leave role out to make them mixed, or "
                 "serve prefill and decode engines under router 'disaggregated')");
  }
}

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
