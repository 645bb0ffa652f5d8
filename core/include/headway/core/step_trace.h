// Writes one JSON line per engine step (and its preemptions) for `simulate --step-trace`:
//   {"engine":0,"step":12,"t":3.41,"duration":0.052,"slices":[{"request":7,"start":2048,
//    "tokens":512,"kind":"prefill"},…],"preempted":[5]}
// Threading: one writer thread. Owns its file.
#pragma once

#include <headway/core/engine.h>

#include <cstdio>
#include <filesystem>

namespace headway::core {

class StepTraceWriter {
 public:
  explicit StepTraceWriter(const std::filesystem::path& file);  // throws Error
  ~StepTraceWriter();
  StepTraceWriter(const StepTraceWriter&) = delete;
  StepTraceWriter& operator=(const StepTraceWriter&) = delete;

  void write(uint32_t engine, const StepDetail& step);

 private:
  std::FILE* file_;
};

}  // namespace headway::core
