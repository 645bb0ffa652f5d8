// Random 64-bit values for what a request leaves to chance: its sampling seed when the client sent
// none (every such request must sample differently, as with OpenAI and vLLM) and the random part of
// generated request ids.
//
// Threading: any thread; each has its own generator, seeded from the OS, so values differ between
// threads and processes. Not for secrets.
#pragma once

#include <cstdint>

namespace headway::serving {

uint64_t random_u64();

}  // namespace headway::serving
