// Writes one JSON line per engine step (and its preemptions) for `simulate --step-trace` and
// `serve --step-trace`:
//   {"engine":0,"step":12,"t":3.41,"duration":0.052,"slices":[{"request":7,"start":2048,
//    "tokens":512,"kind":"prefill","sample":false},…],"preempted":[5],…}
// `t` is the step's start on the engine's clock and `duration` covers scheduling, the forward
// pass and sampling; the time until the engine's next `t` is spent outside the step (handing
// tokens to their streams, the driver's loop, or waiting for work). Before an engine's first
// step, one line describes the model as that engine runs it (a line without "step"):
//   {"engine":0,"model":{"plugin":"cpu","layers":2,…,"max_model_len":2048,
//    "kv_capacity_tokens":65536,"kv_bytes_per_token":4096,"block_size":16}}
// so that `headway profile --from-step-trace` can fit the sim model's cost file from the trace
// alone, wherever it was recorded.
// Threading: write() may be called from several threads (each engine's driver in `serve`); a
// mutex keeps lines whole. Owns its file; the C library buffers it, so a line costs a format and
// rarely a write, not a system call per step.
#pragma once

#include <headway/core/engine.h>

#include <cstdio>
#include <filesystem>
#include <mutex>

namespace headway::core {

class StepTraceWriter {
 public:
  explicit StepTraceWriter(const std::filesystem::path& file);  // throws Error
  ~StepTraceWriter();
  StepTraceWriter(const StepTraceWriter&) = delete;
  StepTraceWriter& operator=(const StepTraceWriter&) = delete;

  // Throws Error naming the file when the line cannot be written (a full disk), once: every later
  // call, from any thread, writes nothing and returns.
  void write(uint32_t engine, const StepDetail& step);

  // The model line of engine `index`; call it once per engine, before its first step. Throws
  // Error as write() does.
  void describe_engine(uint32_t index, const Engine& engine);
  // Writes out what the C library still buffers and closes the file, throwing Error naming it
  // when that fails (a full disk often shows only here); later calls of anything write nothing.
  // Without it the destructor closes the file and can only log a failure.
  void close();

 private:
  template <class WriteLine>
  void write_guarded(WriteLine&& write_line);
  void write_line(uint32_t engine, const StepDetail& step);

  std::filesystem::path path_;
  std::mutex mutex_;
  std::FILE* file_;      // null once closed (guarded by mutex_)
  bool failed_ = false;  // guarded by mutex_
};

}  // namespace headway::core
