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
enum class MmaTiling : uint8_t { k64x32, k64x64, k128x32, k128x64 };
inline constexpr MmaTiling kMmaTilings[] = {MmaTiling::k64x32, MmaTiling::k64x64,
                                            MmaTiling::k128x32, MmaTiling::k128x64};
constexpr uint32_t mma_tiling_rows(MmaTiling t) {
  return t == MmaTiling::k128x32 || t == MmaTiling::k128x64 ? 128 : 64;
}
// The tiling a launch uses: the candidates are built for head dims 64 and 128 (the common model
// shapes) only, other head dims always run 64x32.
constexpr MmaTiling effective_mma_tiling(uint32_t head_dim, MmaTiling t) {
  return head_dim == 64 || head_dim == 128 ? t : MmaTiling::k64x32;
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
  }
  return "?";
}

}  // namespace headway::models::cuda::kernels
