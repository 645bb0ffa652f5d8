#include <headway/core/route_prefix.h>

#include "hash_mix.h"

namespace headway::core {

void route_prefix_hashes(std::span<const int32_t> ids, std::vector<uint64_t>& out) {
  out.clear();
  const size_t pieces = ids.size() / kRoutePrefixPieceTokens;
  out.reserve(pieces);
  uint64_t h = kRoutePrefixChainStart;  // fixed (the header says why)
  for (size_t p = 0; p < pieces; ++p) {
    for (const int32_t id : ids.subspan(p * kRoutePrefixPieceTokens, kRoutePrefixPieceTokens)) {
      h = hash_mix(h, static_cast<uint32_t>(id));
    }
    out.push_back(h);
  }
}

}  // namespace headway::core
