// The sim model's second cost mode: step time as a linear model fitted to measurements of a real
// model on a real machine (`headway profile`, docs/profiling.md), read from a cost file.
//
// Why linear in these sums: a step's work on one device is a sum of per-slice costs that are, to
// first order, proportional to the rows through the linear layers, the rows through the LM head,
// the causal (query, key) pairs of attention and the KV positions read; plus a fixed per-step cost.
// These are exactly the sums StepLoad accumulates, so both modes share the engine-facing code.
//
// File format (TOML, written by core::write_cost_file; keys are what errors name):
//   format = 1
//   [coefficients]  overhead_s, per_token_s, per_sampled_token_s, per_attention_pair_s,
//                   per_kv_token_s                       (seconds per unit, >= 0)
//   [model]         layers, hidden, heads, kv_heads, head_dim, vocab, max_model_len,
//                   kv_capacity_tokens, kv_bytes_per_token (integers > 0)
//   [machine], [fit], date: informational; read only for the log line.
//
// Threading: a FittedCost is immutable after loading; any thread may call its const functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "cost_model.h"

namespace headway::models::sim {

struct FittedCoefficients {
  double overhead_s = 0;            // per step
  double per_token_s = 0;           // per position computed (linear layers)
  double per_sampled_token_s = 0;   // per sampled position (LM head)
  double per_attention_pair_s = 0;  // per causal (query, key) pair
  double per_kv_token_s = 0;        // per KV position read or written
};

struct FittedCost {
  FittedCoefficients coefficients;
  ModelShape model;  // intermediate stays 0: the profiler does not see it and nothing needs it
  uint64_t kv_capacity_tokens = 0;
  uint64_t kv_bytes_per_token = 0;
  std::string machine;  // "cpu model name, N threads" when the file says so, for the log

  // Allocation-free and O(1), like CostModel::step_seconds.
  double step_seconds(const StepLoad& load) const noexcept {
    const FittedCoefficients& c = coefficients;
    return c.overhead_s + c.per_token_s * static_cast<double>(load.tokens) +
           c.per_sampled_token_s * static_cast<double>(load.sampled) +
           c.per_attention_pair_s * load.attention_pairs +
           c.per_kv_token_s * static_cast<double>(load.kv_tokens);
  }
};

// Reads and checks a cost file. Throws std::invalid_argument whose message starts with the file's
// path and names the key (and the line, for syntax errors) on a missing file, a syntax error, a
// missing or mistyped key, a negative coefficient, a zero shape entry, an unknown format version,
// or a KV capacity smaller than max_model_len.
FittedCost load_fitted_cost(const std::filesystem::path& file);

}  // namespace headway::models::sim
