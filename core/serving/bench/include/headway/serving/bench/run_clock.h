// The clock of one benchmark run: seconds since the run started, on std::chrono::steady_clock
// (monotonic, so a wall-clock adjustment during a run cannot bend a latency).
//
// Ownership: plain value. Threading: immutable after construction; safe to share between threads.
#pragma once

#include <chrono>

namespace headway::serving::bench {

class RunClock {
 public:
  using Clock = std::chrono::steady_clock;

  RunClock() : start_(Clock::now()) {}

  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // The instant `seconds` after the start, for sleep_until.
  Clock::time_point at(double seconds) const {
    return start_ +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

 private:
  Clock::time_point start_;
};

}  // namespace headway::serving::bench
