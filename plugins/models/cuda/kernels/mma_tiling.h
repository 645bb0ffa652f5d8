// The prefill block shapes of the tensor-core attention (attention_mma.cu), in a header of their
// own without CUDA so that the cuda model's option parsing (cuda_model_config.h, pure C++) can
// name them. Threading: constants and constexpr functions.
#pragma once

#include <cstdint>

namespace headway::models::cuda::kernels {

// Shapes of the tensor-core kernel's prefill blocks: query rows (16 per warp) x keys per shared-
// memory tile. More rows share each K/V tile loaded, more keys per tile halve the barriers and
// copies per key: 128x64, the cuda model's default, was the fastest on an H200 (16-22% less time
// than 64x32 at 512-8,192 keys, docs/performance.md); 64x32 stays the kernels' own default and
// the only shape of head dims other than 64 and 128. Selected with the cuda model's
// `attention_tiling` option, checked by the attention test and timed by cuda_benchmark.
//
// The lean tilings are the same shapes with a shorter softmax, candidates for the prefill goal
// (the attention ran at 8% of the BF16 peak where the GEMMs ran at 64-70%): scores scaled by
// log2(e) / sqrt(head_dim) and exponentiated base 2 (one FFMA and one ex2.approx a score, against
// a multiply, a compare and expf()), the causal mask applied only on the tiles where a warp's rows
// stop, and the four-warp blocks bounded to three an SM (168 registers a thread, with 12-56 bytes
// of spills at head_dim 128; two fitted before). Not yet run on a GPU: the next device check times
// them against the others.
enum class MmaTiling : uint8_t {
  k64x32,
  k64x64,
  k128x32,
  k128x64,
  kLean64x32,
  kLean64x64,
  kLean128x32,
  kLean128x64
};
inline constexpr MmaTiling kMmaTilings[] = {
    MmaTiling::k64x32,     MmaTiling::k64x64,     MmaTiling::k128x32,     MmaTiling::k128x64,
    MmaTiling::kLean64x32, MmaTiling::kLean64x64, MmaTiling::kLean128x32, MmaTiling::kLean128x64};
constexpr uint32_t mma_tiling_rows(MmaTiling t) {
  return t == MmaTiling::k128x32 || t == MmaTiling::k128x64 || t == MmaTiling::kLean128x32 ||
                 t == MmaTiling::kLean128x64
             ? 128
             : 64;
}
// The tiling a launch uses: the candidates are built for head dims 64 and 128 (the common model
// shapes) only, other head dims always run 64x32.
constexpr MmaTiling effective_mma_tiling(uint32_t head_dim, MmaTiling t) {
  return head_dim == 64 || head_dim == 128 ? t : MmaTiling::k64x32;
}
constexpr bool mma_tiling_is_lean(MmaTiling t) {
  return t == MmaTiling::kLean64x32 || t == MmaTiling::kLean64x64 || t == MmaTiling::kLean128x32 ||
         t == MmaTiling::kLean128x64;
}
constexpr const char* mma_tiling_name(MmaTiling t) {
  switch (t) {
    case MmaTiling::k64x32:
      return "64x32";
    case MmaTiling::k64x64:
      return "64x64";
    case MmaTiling::k128x32:
      return "128x32";
    case MmaTiling::k128x64:
      return "128x64";
    case MmaTiling::kLean64x32:
      return "lean-64x32";
    case MmaTiling::kLean64x64:
      return "lean-64x64";
    case MmaTiling::kLean128x32:
      return "lean-128x32";
    case MmaTiling::kLean128x64:
      return "lean-128x64";
  }
  return "?";
}

}  // namespace headway::models::cuda::kernels
