// What the toy wall-clock models of these tests say of themselves: one layer of a one-head model
// 8 wide, max_model_len 1,024, no end token (outputs run to max_tokens), room for 16,384 tokens
// with no memory behind their blocks. Each model sets the flags its test is about.
#pragma once

#include <headway/abi.h>

#include <cstdint>

namespace headway::test {

inline hw_model_info toy_model_info(uint32_t vocab) {
  hw_model_info i{};
  i.struct_size = sizeof(hw_model_info);
  i.layers = 1;
  i.hidden = 8;
  i.heads = 1;
  i.kv_heads = 1;
  i.head_dim = 8;
  i.vocab = vocab;
  i.max_model_len = 1024;
  i.eos_token = UINT32_MAX;
  i.kv_bytes_per_token = 32;
  i.kv_capacity_tokens = 1 << 14;
  return i;
}

}  // namespace headway::test
