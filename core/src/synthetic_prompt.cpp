#include <headway/core/synthetic_prompt.h>

#include <algorithm>

namespace headway::core {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed generator whose output is the same on
// every platform, unlike std:: distributions.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += kGolden);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Ids `skip` onwards of the stream that starts at `state` (each id advances the state by one
// step, so skipping is one multiplication).
void fill(uint64_t state, uint64_t skip, TokenIdRange range, int32_t* first, int32_t* last) {
  state += skip * kGolden;
  const auto span = static_cast<uint64_t>(range.end - range.first);
  for (int32_t* id = first; id != last; ++id) {
    *id = range.first + static_cast<int32_t>(splitmix64(state) % span);
  }
}

}  // namespace

std::vector<int32_t> synthetic_prompt(uint64_t seed, const WorkloadRequest& request,
                                      TokenIdRange range) {
  return synthetic_prompt_ids(seed, request, range, 0, request.prompt_tokens);
}

std::vector<int32_t> synthetic_prompt_ids(uint64_t seed, const WorkloadRequest& request,
                                          TokenIdRange range, uint32_t from, uint32_t to) {
  to = std::min(to, request.prompt_tokens);
  from = std::min(from, to);
  std::vector<int32_t> ids(to - from);
  const uint32_t shared = std::min(request.shared_prefix_tokens, request.prompt_tokens);
  const uint64_t base = seed * 0x2545F4914F6CDD1Dull;
  // Shared beginnings are numbered apart from request ids (the top bit set), by class and index.
  const uint64_t beginning =
      (uint64_t{1} << 63) | (uint64_t{request.class_index} << 32) | request.shared_prefix;
  const uint32_t shared_to = std::min(shared, to);
  if (from < shared_to) {
    fill(base ^ beginning, from, range, ids.data(), ids.data() + (shared_to - from));
  }
  // A conversation's turns continue one stream (the first turn's id; a request on its own is its
  // own conversation), so each turn's own ids begin with the previous turn's.
  const uint32_t own_from = std::max(from, shared);
  if (own_from < to) {
    fill(base ^ request.conversation_id(), own_from - shared, range, ids.data() + (own_from - from),
         ids.data() + ids.size());
  }
  return ids;
}

}  // namespace headway::core
