// How a kernel is put on its stream: the stream, and whether it may start while the kernel before
// it on that stream is still finishing (programmatic dependent launch, compute capability 9.0:
// Hopper). Plain C++ header, taken by the launchers of the kernels a decode step runs.
//
// A decode step of one or a few rows is some 325 short kernels, most of them memory-bound, and
// each starts only when the one before has drained: the last blocks of one and the first loads of
// the next leave the GPU's memory idle in between. With `overlap`, the launcher asks the runtime to
// launch the kernel once every block of the previous one has passed its own wait (or exited); the
// kernel then waits on the device (griddepcontrol.wait) for the previous kernel's completion before
// it touches memory a kernel of the stream writes, and may first read what none writes (weights;
// the step plan's arrays, copied before the step's first kernel, which is launched plainly).
// Results are the same either way: only the start moves. Kernels whose launchers ignore it are
// launched as usual, which is always safe. The kernels must be built for compute capability 9.0:
// built for an older one, the wait compiles away while the attribute still takes effect on a
// Hopper GPU, so overlapped_launch_problem() is asked before any overlapped launch.
//
// Ownership: holds the stream handle only. Threading: a value; the launch is the launcher's.
#pragma once

#include <cuda_runtime.h>

#include <string>

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

// Why launches with overlap cannot run on `device` ("" when they can): a GPU before compute
// capability 9.0, or kernels built for an older virtual architecture (CMAKE_CUDA_ARCHITECTURES),
// whose overlapped instantiations do not wait. Makes `device` current.
std::string overlapped_launch_problem(int device);

}  // namespace headway::models::cuda::kernels
