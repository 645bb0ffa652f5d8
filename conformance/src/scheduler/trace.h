// Generated scheduler workloads: deterministic from a seed, each one engine shape plus requests
// that arrive at given steps, with optional aborts. The mix covers random prompt and output
// lengths, bursts, tiny and huge token budgets, small KV pools (preemptions), aborts mid-prefill,
// and the two ways a waiting request comes with computed tokens: a prompt beginning found in the
// engine's prefix cache, and KV moved to a decode engine.
//
// Threading: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace headway::conformance {

struct TraceRequest {
  uint64_t id = 0;
  uint64_t arrival_step = 0;
  uint32_t prompt_tokens = 0;
  uint32_t max_output_tokens = 0;
  // Prompt token ids (prompt_tokens of them), so that the prefix cache sees shared beginnings;
  // empty for a request whose ids do not matter.
  std::vector<int32_t> tokens;
  // Arrives as a KV transfer from a prefill engine: its prompt computed there and its first
  // token generated, as a decode engine receives it.
  bool moved = false;
};

struct TraceSpec {
  std::string name;  // "kv_pressure#3": kind and index, for messages
  uint32_t block_size = 16;
  uint32_t kv_blocks = 0;
  uint32_t max_model_len = 0;
  uint32_t budget = 0;                 // max_num_batched_tokens to set, 0 = leave the plugin's
  uint32_t max_seqs = 0;               // max_num_seqs to set, 0 = leave the plugin's
  bool decode_engine = false;          // the engine's role is decode (moved requests arrive)
  bool moved_kv_as_needed = false;     // moved requests reserve blocks as needed, not all up front
  std::vector<TraceRequest> requests;  // by arrival step
  std::vector<uint64_t> abort_steps;   // before these steps, abort a request (mid-prefill first)
};

// `count` traces cycling through the kinds steady, burst, tiny_budget, huge_budget, kv_pressure,
// aborts, shared_prefix and moved_kv.
std::vector<TraceSpec> generate_traces(uint64_t seed, uint32_t count);

// `requests` short requests arriving at step 0 on an engine whose KV pool runs 64 of them at a
// time: the waiting queue holds thousands, as a server's does in a burst past its capacity (a
// snapshot of the other kinds holds at most a few hundred).
TraceSpec deep_queue_trace(uint64_t seed, uint32_t requests);

}  // namespace headway::conformance
