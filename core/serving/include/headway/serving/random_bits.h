// Random 64-bit values for what a request leaves to chance: its sampling seed when the client sent
// none (every such request must sample differently, as with OpenAI and vLLM) and the request ids
// the server chooses.
//
// Threading: any thread; each has its own generator, seeded from the OS, so values differ between
// threads and processes. Not for secrets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace headway::serving {

uint64_t random_u64();

// A request id the server chooses: `prefix` followed by 32 random hex digits. Random, as vLLM's,
// not a counter: a client cannot guess (and abort) another client's request.
std::string random_request_id(std::string_view prefix);

}  // namespace headway::serving
