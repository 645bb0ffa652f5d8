#include "step_graphs.h"

#include "cuda_check.h"

namespace headway::models::cuda {

StepGraphs::~StepGraphs() { clear(); }

void StepGraphs::clear() noexcept {
  for (Entry& e : entries_) {
    if (e.exec != nullptr) (void)cudaGraphExecDestroy(e.exec);
    e.exec = nullptr;
    // Failed captures are mostly another thread's synchronisation at the wrong moment: with new
    // buffers the shape gets its attempts again rather than running launch by launch for good.
    e.failed_captures = 0;
  }
}

StepGraphs::Entry& StepGraphs::find_or_add(uint64_t key) {
  for (Entry& e : entries_) {
    if (e.key == key) return e;
  }
  entries_.push_back(Entry{key, false, 0, nullptr});
  return entries_.back();
}

void StepGraphs::begin_capture(cudaStream_t stream) {
  // Thread-local: only this thread's calls are checked for what a capture forbids (a
  // synchronisation, an allocation on the legacy stream), not other engines' threads.
  HW_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
}

void StepGraphs::abandon_capture(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }
  // A failed capture's error is not sticky, but it is the thread's last error: clear it so that the
  // next launch check does not report it.
  (void)cudaGetLastError();
}

cudaGraphExec_t StepGraphs::end_capture(cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  HW_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  check_cuda(err, "cudaGraphInstantiate");
  return exec;
}

bool StepGraphs::launch(Entry& entry, cudaStream_t stream) {
  const cudaError_t err = cudaGraphLaunch(entry.exec, stream);
  if (err == cudaSuccess) return true;
  (void)cudaGraphExecDestroy(entry.exec);
  entry.exec = nullptr;
  (void)cudaGetLastError();
  note_failure(entry, std::string("cudaGraphLaunch: ") + cudaGetErrorString(err));
  return false;
}

}  // namespace headway::models::cuda
