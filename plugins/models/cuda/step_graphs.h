// Captured CUDA graphs of decode steps (the cuda model's `cuda_graph_max_batch` option). A decode
// step of an 8B model is about 360 small launches; replaying them as one graph removes the host's
// launch cost and the gaps between kernels, which dominate at small batches.
//
// A graph bakes in every kernel argument, so a step may replay one only when all of them are the
// same: the step plan pads decode steps to a few fixed shapes (StepPlan::graph_key(), whose device
// arrays always sit at the same offsets), and the buffers the kernels use must not have moved since
// the capture, which the owner tracks with a generation number (ModelShard::buffers_generation()):
// a new generation drops every graph.
//
// The first step of a shape runs launch by launch (it loads modules and picks cuBLASLt algorithms,
// which should not happen during a capture); the second is captured and replayed, and every later
// one replayed.
//
// Ownership: owns the instantiated graphs; destroy it while their device's context is alive.
// Threading: one thread at a time (the engine's), with the graphs' device current.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace headway::models::cuda {

class StepGraphs {
 public:
  StepGraphs() = default;
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Runs the step of shape `key` on `stream`: `enqueue()` (which launches the step's kernels on
  // that stream, and nothing that synchronises) directly the first time the shape is seen, then
  // captured once and replayed. A step whose capture fails runs directly, and the failure is kept
  // for the owner to log (capture_failures(), last_capture_failure()): a graph is an optimisation,
  // never a reason to fail a step. Another thread synchronising the same GPU during a capture
  // invalidates it, so a shape is tried again, up to kCaptureAttempts times. A graph whose launch
  // fails is dropped (counted as a failed capture) and the step runs directly, so that an error
  // the context keeps (an illegal address) throws sdk::Error from the step's own launches, as it
  // would without graphs.
  template <class Enqueue>
  void run(uint64_t key, uint64_t buffers_generation, cudaStream_t stream, Enqueue&& enqueue) {
    if (buffers_generation != generation_) {
      clear();
      generation_ = buffers_generation;
    }
    Entry& entry = find_or_add(key);
    if (entry.exec == nullptr && entry.warmed && entry.failed_captures < kCaptureAttempts) {
      try {
        begin_capture(stream);
        enqueue();
        entry.exec = end_capture(stream);
        ++captures_;
      } catch (const std::exception& e) {
        abandon_capture(stream);
        note_failure(entry, e.what());
      } catch (...) {  // the stream must not stay in capture mode, whatever was thrown
        abandon_capture(stream);
        note_failure(entry, "unknown exception during capture");
      }
    }
    if (entry.exec != nullptr && launch(entry, stream)) {
      ++replays_;
      return;
    }
    enqueue();
    entry.warmed = true;
    ++direct_steps_;
  }

  // Destroys every graph (their buffers moved, or the model is unloaded). The shapes stay known as
  // warmed up: the next step of one is captured at once, and one whose captures failed gets
  // kCaptureAttempts more.
  void clear() noexcept;

  // Graphs captured, steps replayed and steps run directly since construction.
  uint64_t captures() const { return captures_; }
  uint64_t replays() const { return replays_; }
  uint64_t direct_steps() const { return direct_steps_; }
  uint64_t capture_failures() const { return capture_failures_; }
  const std::string& last_capture_failure() const { return last_capture_failure_; }

 private:
  struct Entry {
    uint64_t key = 0;
    bool warmed = false;  // ran directly once: modules loaded, algorithms chosen
    uint32_t failed_captures = 0;
    cudaGraphExec_t exec = nullptr;
  };
  static constexpr uint32_t kCaptureAttempts = 3;
  Entry& find_or_add(uint64_t key);
  static void begin_capture(cudaStream_t stream);
  static void abandon_capture(cudaStream_t stream) noexcept;
  static cudaGraphExec_t end_capture(cudaStream_t stream);
  // Launches the entry's graph. On failure destroys it (entry.exec becomes null), clears the
  // thread's last error, notes the failure and returns false.
  bool launch(Entry& entry, cudaStream_t stream);
  void note_failure(Entry& entry, const std::string& why) {
    ++entry.failed_captures;
    ++capture_failures_;
    last_capture_failure_ = why;
  }

  // A few dozen shapes at most (batch buckets x split levels): a linear search is the fastest.
  std::vector<Entry> entries_;
  uint64_t generation_ = 0;
  uint64_t captures_ = 0;
  uint64_t replays_ = 0;
  uint64_t direct_steps_ = 0;
  uint64_t capture_failures_ = 0;
  std::string last_capture_failure_;
};

}  // namespace headway::models::cuda
