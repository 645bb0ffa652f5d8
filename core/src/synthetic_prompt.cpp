#include <headway/core/synthetic_prompt.h>

#include <algorithm>

namespace headway::core {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed generator whose output is the same on
// every platform, unlike std:: distributions.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill(uint64_t state, TokenIdRange range, int32_t* first, int32_t* last) {
  const auto span = static_cast<uint64_t>(range.end - range.first);
  for (int32_t* id = first; id != last; ++id) {
    *id = range.first + static_cast<int32_t>(splitmix64(state) % span);
  }
}

}  // namespace

std::vector<int32_t> synthetic_prompt(uint64_t seed, const WorkloadRequest& request,
                                      TokenIdRange range) {
  std::vector<int32_t> ids(request.prompt_tokens);
  const uint32_t shared = std::min(request.shared_prefix_tokens, request.prompt_tokens);
  const uint64_t base = seed * 0x2545F4914F6CDD1Dull;
  // Shared beginnings are numbered apart from request ids (the top bit set), by class and index.
  const uint64_t beginning =
      (uint64_t{1} << 63) | (uint64_t{request.class_index} << 32) | request.shared_prefix;
  fill(base ^ beginning, range, ids.data(), ids.data() + shared);
  // A conversation's turns continue one stream (the first turn's id; a request on its own is its
  // own conversation), so each turn's own ids begin with the previous turn's.
  fill(base ^ request.conversation_id(), range, ids.data() + shared, ids.data() + ids.size());
  return ids;
}

}  // namespace headway::core
