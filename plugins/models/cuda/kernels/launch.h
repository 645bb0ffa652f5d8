// How a kernel is put on its stream: the stream, and whether it may start while the kernel before
// it on that stream is still finishing (programmatic dependent launch, compute capability 9.0:
// Hopper). Plain C++ header, taken by the launchers of the kernels a decode step runs.
//
// A decode step of one or a few rows is some 330 short kernels, most of them memory-bound, and
// each starts only when the one before has drained: the last blocks of one and the first loads of
// the next leave the GPU's memory idle in between. With `overlap`, the launcher asks the runtime to
// launch the kernel as soon as every block of the previous one has started; the kernel then waits
// on the device (griddepcontrol.wait) for the previous kernel's results before it reads or writes
// anything another kernel touches, and may first load what no kernel writes (the GEMV's weights).
// Results are the same either way: only the start moves. Kernels whose launchers ignore it are
// launched as usual, which is always safe; a GPU before Hopper ignores the attribute.
//
// Ownership: holds the stream handle only. Threading: a value; the launch is the launcher's.
#pragma once

#include <cuda_runtime.h>

namespace headway::models::cuda::kernels {

struct Launch {
  // Implicit on purpose: every launcher's callers that pass a plain stream keep launching as
  // before (overlap off).
  Launch(cudaStream_t s = nullptr,
         bool overlap_previous = false)  // NOLINT(google-explicit-constructor)
      : stream(s), overlap(overlap_previous) {}
  cudaStream_t stream;
  bool overlap;
};

}  // namespace headway::models::cuda::kernels
