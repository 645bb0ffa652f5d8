// Progress of a benchmark run on stderr: on a terminal, one line redrawn in place (a bar, requests
// sent / finished / failed, streams in flight, elapsed time); otherwise (a log file, CI) a plain
// line every `interval_s`, so that logs stay readable. A final line is printed by stop().
//
// Ownership: owns its ticker thread. Threading: the counters are updated from any thread; start,
// stop and the destructor are called from the thread that created the reporter.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "headway/serving/bench/run_clock.h"

namespace headway::serving::bench {

struct ProgressCounters {
  std::atomic<size_t> sent{0}, finished{0}, failed{0};
};

class ProgressReporter {
 public:
  // Writes to `out` (borrowed; stderr in the CLI). `terminal`: redraw in place. `interval_s`: how
  // often to print (a redraw is cheap; a log line is not).
  ProgressReporter(std::FILE* out, bool terminal, size_t total, const ProgressCounters& counters,
                   const RunClock& clock, double interval_s);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // Prints the final state and stops the ticker. Idempotent.
  void stop();

  // The progress line for these figures (no newline); pure, for tests.
  static std::string line(size_t total, size_t sent, size_t finished, size_t failed,
                          double elapsed_s, bool with_bar);

 private:
  void print(bool final_line);

  std::FILE* out_;
  const bool terminal_;
  const size_t total_;
  const ProgressCounters& counters_;
  const RunClock& clock_;
  const double interval_s_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread ticker_;
};

// True when `stream` is a terminal (isatty).
bool is_terminal(std::FILE* stream);

}  // namespace headway::serving::bench
