// Time a plugin's calls spend off the CPU by the plugin's own doing (a sleep, blocking I/O, a
// contended lock), which CPU time does not see: calls during which the calling thread gave up the
// CPU itself (getrusage's voluntary context switches), and for each such call its wall time less
// its CPU time, less the time the thread then stood ready for a CPU again (/proc/thread-self/
// schedstat: a busy machine's delay, not the plugin's). scheduler.never_waits and
// router.never_waits judge the result.
//
// Threading: the calling thread's own counters; one thread.
#pragma once

#include <headway/conformance/test_recorder.h>

#include <cstdint>
#include <string>

namespace headway::conformance {

class CallWaits {
 public:
  // The first call starts now.
  CallWaits();
  // Where calls do not follow each other: the next call starts now.
  void restart();
  // The call that started last has ended: returns its CPU seconds and counts its wait. The next
  // call starts now.
  double call_ended();

  uint64_t voluntary_switches() const { return voluntary_switches_; }
  uint32_t calls_waiting_over_1ms() const { return calls_waiting_over_1ms_; }
  double waited_max_seconds() const { return waited_max_seconds_; }

 private:
  double cpu_before_ = 0.0;
  double wall_before_ = 0.0;
  uint64_t voluntary_before_ = 0;
  uint64_t involuntary_before_ = 0;
  uint64_t run_queue_before_ns_ = 0;
  uint64_t voluntary_switches_ = 0;
  uint32_t calls_waiting_over_1ms_ = 0;
  double waited_max_seconds_ = 0.0;
};

// What scheduler.never_waits and router.never_waits make of the waits of `calls` calls of a
// `who` ("scheduler", "router"): FAIL when more than 1% waited over 1 ms, QUALITY_WARNING when
// any did, a note otherwise; the figures as the test's metrics.
void judge_waits(TestRecorder& t, const std::string& who, uint64_t calls,
                 uint64_t voluntary_switches, uint32_t calls_waiting_over_1ms,
                 double waited_max_seconds);

}  // namespace headway::conformance
