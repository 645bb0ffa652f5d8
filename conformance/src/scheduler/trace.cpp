#include "trace.h"

#include <algorithm>
#include <random>

namespace headway::conformance {
namespace {

constexpr const char* kKinds[] = {"steady",      "burst",  "tiny_budget",   "huge_budget",
                                  "kv_pressure", "aborts", "shared_prefix", "moved_kv"};

uint32_t uniform(std::mt19937_64& rng, uint32_t lo, uint32_t hi) {
  return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
}

void append_random_ids(std::mt19937_64& rng, uint32_t count, std::vector<int32_t>& out) {
  for (uint32_t i = 0; i < count; ++i) out.push_back(static_cast<int32_t>(uniform(rng, 0, 31999)));
}

// Prompts that begin alike, as chat traffic's do: behind one of a few shared system prompts or
// documents (some of them just that beginning, so all but the last token is found cached), the
// whole prompt of a request generated before it repeated (a retry) or continued (the next turn;
// it may arrive first, as arrival steps are drawn apart), or a prompt of its own. Each is cut to
// `room` tokens.
std::vector<int32_t> shared_prefix_prompt(std::mt19937_64& rng,
                                          const std::vector<std::vector<int32_t>>& beginnings,
                                          const std::vector<TraceRequest>& earlier, uint32_t room) {
  std::vector<int32_t> tokens;
  const uint32_t shape = uniform(rng, 0, 7);
  if (shape <= 1 && !earlier.empty()) {
    tokens = earlier[uniform(rng, 0, static_cast<uint32_t>(earlier.size() - 1))].tokens;
    if (shape == 1) append_random_ids(rng, uniform(rng, 1, 200), tokens);
  } else if (shape <= 6) {
    tokens = beginnings[uniform(rng, 0, static_cast<uint32_t>(beginnings.size() - 1))];
    append_random_ids(rng, uniform(rng, 0, 200), tokens);
  } else {
    append_random_ids(rng, uniform(rng, 1, 256), tokens);
  }
  if (tokens.size() > room) tokens.resize(room);
  return tokens;
}

}  // namespace

std::vector<TraceSpec> generate_traces(uint64_t seed, uint32_t count) {
  std::vector<TraceSpec> traces;
  for (uint32_t t = 0; t < count; ++t) {
    // One generator per trace, so that a trace does not change when the count does.
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + t);
    const std::string kind = kKinds[t % std::size(kKinds)];
    TraceSpec spec;
    spec.name = kind + "#" + std::to_string(t);
    spec.block_size = (t / std::size(kKinds)) % 2 == 0 ? 16 : 8;
    spec.max_model_len = 2048;
    spec.kv_blocks = 8192;
    uint32_t requests = uniform(rng, 40, 160);
    uint64_t horizon = uniform(rng, 50, 400);  // steps over which requests arrive
    if (kind == "tiny_budget") {
      spec.budget = uniform(rng, 1, 48);
      requests = uniform(rng, 10, 30);
      spec.max_model_len = 512;
    } else if (kind == "huge_budget") {
      spec.budget = 1u << 20;
      spec.max_seqs = uniform(rng, 1, 3) == 1 ? uniform(rng, 1, 4) : 0;
    } else if (kind == "kv_pressure") {
      // Barely more than one request of max_model_len: running requests outgrow the pool and the
      // scheduler has to preempt.
      spec.max_model_len = 1024;
      spec.kv_blocks = spec.max_model_len / spec.block_size + uniform(rng, 0, 16);
      horizon = uniform(rng, 5, 40);
    } else if (kind == "aborts") {
      spec.budget = uniform(rng, 32, 256);  // small enough that prompts span several steps
    } else if (kind == "burst") {
      horizon = 0;  // set per request below
    } else if (kind == "shared_prefix" || kind == "moved_kv") {
      // Half of them with a pool of one long request and a little more: cached blocks are
      // evicted, shared blocks held by several running requests, moved KV waits for room.
      if (uniform(rng, 0, 1) == 0) {
        spec.kv_blocks = spec.max_model_len / spec.block_size + uniform(rng, 0, 64);
      }
      spec.decode_engine = kind == "moved_kv";
      // Two in four rounds of the kinds with moved_kv_blocks = "as_needed" (each block size in
      // both ways): moved requests then grow after their arrival, and a scheduler must preempt
      // them like any other (no draw, so that no other trace changes).
      spec.moved_kv_as_needed = spec.decode_engine && (t / std::size(kKinds)) % 4 >= 2;
    }
    std::vector<std::vector<int32_t>> beginnings(kind == "shared_prefix" ? uniform(rng, 1, 4) : 0);
    for (std::vector<int32_t>& b : beginnings) append_random_ids(rng, uniform(rng, 1, 600), b);
    std::vector<uint64_t> bursts;
    for (int b = 0; b < 4; ++b) bursts.push_back(uniform(rng, 0, 300));
    for (uint32_t i = 0; i < requests; ++i) {
      TraceRequest r;
      r.id = i + 1;
      r.max_output_tokens = uniform(rng, 1, kind == "kv_pressure" ? 200 : 64);
      // Seven of eight moved: a request generated its first token where it was prefilled, so it
      // has at least two; the rest are prefilled here (a decode engine does when a transfer fails).
      r.moved = kind == "moved_kv" && uniform(rng, 0, 7) != 0;
      if (r.moved) r.max_output_tokens = std::max(r.max_output_tokens, 2u);
      const uint32_t room = spec.max_model_len - r.max_output_tokens;
      if (kind == "shared_prefix") {
        r.tokens = shared_prefix_prompt(rng, beginnings, spec.requests, room);
        r.prompt_tokens = static_cast<uint32_t>(r.tokens.size());
      } else {
        // Mostly short prompts with a long tail, as in chat traffic.
        r.prompt_tokens =
            uniform(rng, 0, 3) == 0 ? uniform(rng, 1, room) : uniform(rng, 1, std::min(room, 256u));
      }
      r.arrival_step = kind == "burst" ? bursts[uniform(rng, 0, 3)]
                                       : uniform(rng, 0, static_cast<uint32_t>(horizon));
      spec.requests.push_back(std::move(r));
    }
    std::stable_sort(spec.requests.begin(), spec.requests.end(),
                     [](const TraceRequest& a, const TraceRequest& b) {
                       return a.arrival_step < b.arrival_step;
                     });
    if (kind == "aborts") {
      for (int a = 0; a < 12; ++a) spec.abort_steps.push_back(uniform(rng, 1, 300));
      std::sort(spec.abort_steps.begin(), spec.abort_steps.end());
    }
    traces.push_back(std::move(spec));
  }
  return traces;
}

TraceSpec deep_queue_trace(uint64_t seed, uint32_t requests) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + 0xdeeb);
  TraceSpec spec;
  spec.name = "deep_queue";
  spec.block_size = 16;
  spec.max_model_len = 512;
  spec.kv_blocks = 64 * 4;  // 64 requests of up to 64 tokens
  spec.budget = 2048;
  for (uint32_t i = 0; i < requests; ++i) {
    TraceRequest r;
    r.id = i + 1;
    r.prompt_tokens = uniform(rng, 1, 56);
    r.max_output_tokens = uniform(rng, 1, 8);
    spec.requests.push_back(std::move(r));
  }
  return spec;
}

}  // namespace headway::conformance
