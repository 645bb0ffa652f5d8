// The device and host halves of an overlapped launch (launch.h). Only .cu files include this.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "launch.h"

namespace headway::models::cuda::kernels::detail {

// Called by every thread of a kernel instantiated for overlapped launches, before its first access
// to memory a kernel of the stream writes: waits until the previous kernel has completed and its
// writes are visible, then lets the next kernel launch. Waiting first keeps the order transitive:
// a kernel's wait returning means every earlier kernel has completed, since the previous one
// completed only after its own threads waited. (Every thread waits, though one per grid would do
// for the order: none then reads early by mistake. griddepcontrol.wait returns at once in a
// kernel launched without the attribute.) kOverlap false: nothing, so the kernels launched as
// before keep their code. Letting the next kernel launch right after the wait bounds the chain at
// two resident grids; whether a later trigger (or none, which triggers at exit) is faster on an
// H200 is not measured.
template <bool kOverlap>
__device__ __forceinline__ void wait_for_previous_kernel() {
  if constexpr (kOverlap) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  }
}

// Launches `overlapping` (the kernel's instantiation that calls wait_for_previous_kernel<true>)
// with the programmatic-serialization attribute when on.overlap, else `plain` as <<<>>> would;
// returns the launch's error. Taking both keeps a launcher from overlapping a kernel that does not
// wait.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*plain)(Params...), void (*overlapping)(Params...), dim3 grid,
                          dim3 block, size_t smem, const Launch& on, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = on.stream;
  config.attrs = &attribute;
  config.numAttrs = on.overlap ? 1 : 0;
  return cudaLaunchKernelEx(&config, on.overlap ? overlapping : plain, std::forward<Args>(args)...);
}

}  // namespace headway::models::cuda::kernels::detail
