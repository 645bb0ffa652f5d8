// The hashes a router that reads how prompts begin (hw_router_table.route_with_prefix, ABI 1.8) is
// given: one per whole piece of kRoutePrefixPieceTokens ids, each naming the prompt up to the end
// of its piece (hw_route_prefix in abi.h).
//
// The seed is fixed, not random as the prefix cache's, so that a simulation placed by such a router
// gives the same figures when it runs again. A router keeps hashes, not ids, so a collision can
// only send a request to an engine without its beginning (which then computes it), never hand it
// another prompt's KV: the engine's cache compares ids.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace headway::core {

// Tokens a hash covers more than the one before. 64: an engine reuses KV by blocks of 16 by
// default, and matching a beginning to a block would only refine which engine holds more of it by
// less than one piece, at four times the hashes a router keeps.
inline constexpr uint32_t kRoutePrefixPieceTokens = 64;

// Where the hashes' chain starts: hash_mix (hash_mix.h) of it with each id of a prompt in turn,
// read after every kRoutePrefixPieceTokens-th, gives the hashes. The prefix cache continues the
// chain along its blocks to report what it stores and evicts in these hashes (hw_kv_event).
inline constexpr uint64_t kRoutePrefixChainStart = 0x6A09E667F3BCC909ull;

// Replaces `out` with the hashes of `ids`' whole pieces (none for fewer ids than a piece). Keeps
// out's capacity, so a caller that reuses it allocates only for a longer prompt than before.
void route_prefix_hashes(std::span<const int32_t> ids, std::vector<uint64_t>& out);

}  // namespace headway::core
