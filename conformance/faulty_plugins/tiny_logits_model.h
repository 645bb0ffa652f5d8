// What the faulty toy models that return logits say of themselves: one layer, a 64-token
// vocabulary, no KV memory behind their blocks, a virtual clock. Each faulty model adds the flag
// its fault needs.
#pragma once

#include <headway/abi.h>

#include <cstdint>

namespace headway::conformance::faulty {

inline constexpr uint32_t kTinyVocab = 64;

inline hw_model_info tiny_logits_model_info() {
  hw_model_info i{};
  i.struct_size = sizeof(hw_model_info);
  i.layers = 1;
  i.hidden = 8;
  i.heads = 1;
  i.kv_heads = 1;
  i.head_dim = 8;
  i.vocab = kTinyVocab;
  i.max_model_len = 4096;
  i.eos_token = UINT32_MAX;
  i.kv_bytes_per_token = 32;
  i.kv_capacity_tokens = 1 << 16;
  i.needs_token_ids = 1;
  i.reports_duration = 1;
  i.returns_logits = 1;
  return i;
}

}  // namespace headway::conformance::faulty
