// The tiny checkpoint the GPU tests run the cuda model on (written by the make-tiny code): BF16
// weights so that the cpu and cuda models compute with the same weight values; head_dim 64, GQA
// group 2, llama3 rope scaling. Threading: a plain function.
#pragma once

#include <tiny_checkpoint.h>

namespace headway::gpu_test {

inline models::cpu::TinyModelSpec tiny_bf16_spec() {
  models::cpu::TinyModelSpec s;
  s.layers = 2;
  s.hidden = 256;
  s.heads = 4;
  s.kv_heads = 2;
  s.ffn = 512;
  s.vocab = 320;
  s.max_position_embeddings = 4096;
  s.seed = 11;
  s.dtype = models::cpu::DType::kBF16;
  return s;
}

}  // namespace headway::gpu_test
