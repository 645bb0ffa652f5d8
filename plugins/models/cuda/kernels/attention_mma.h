// The tensor-core paged attention (attention_mma.cu), behind paged_attention() in attention.cu;
// internal to the kernels library. Same arguments, units and outputs as paged_attention.
//
// Ownership: device pointers borrowed for the launch. Threading: enqueues on `on.stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention.h"

namespace headway::models::cuda::kernels {

// Head dims the tensor-core kernel is built for: 32, 64, 128 and 256.
bool mma_attention_supports(uint32_t head_dim);

// Prefill tiles of at most kAttentionMmaTileRows rows; decode tokens, split or not. The caller has
// checked the GQA group and head_dim.
cudaError_t mma_paged_attention(const AttentionArgs& args, const AttentionUnit* units,
                                uint32_t unit_count, AttentionKind kind, const Launch& on);

}  // namespace headway::models::cuda::kernels
