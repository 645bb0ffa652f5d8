#include "call_waits.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>

namespace headway::conformance {

namespace {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double wall_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Nanoseconds the calling thread has spent ready to run but waiting for a CPU (the second field of
// /proc/thread-self/schedstat); 0 where the kernel does not say.
uint64_t run_queue_wait_ns() {
  std::FILE* file = std::fopen("/proc/thread-self/schedstat", "r");
  if (file == nullptr) return 0;
  unsigned long long on_cpu = 0, waiting = 0;
  const int read = std::fscanf(file, "%llu %llu", &on_cpu, &waiting);
  std::fclose(file);
  return read == 2 ? waiting : 0;
}

// Times the calling thread left the CPU: by its own doing (ru_nvcsw) and preempted by other work
// on the machine (ru_nivcsw), which is not the plugin's doing.
void context_switches(uint64_t& voluntary, uint64_t& involuntary) {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  voluntary = static_cast<uint64_t>(usage.ru_nvcsw);
  involuntary = static_cast<uint64_t>(usage.ru_nivcsw);
}

}  // namespace

CallWaits::CallWaits() {
  // Read only here and around calls that left the CPU (a file read per call would weigh on the
  // calls' mean). Time ready for a CPU accrues only after the thread left it, so re-reading after
  // every such call, preempted or not, charges each call with its own delay and no earlier one's.
  run_queue_before_ns_ = run_queue_wait_ns();
  restart();
}

void CallWaits::restart() {
  cpu_before_ = thread_cpu_seconds();
  wall_before_ = wall_seconds();
  context_switches(voluntary_before_, involuntary_before_);
}

double CallWaits::call_ended() {
  const double cpu_after = thread_cpu_seconds();
  const double wall_after = wall_seconds();
  uint64_t voluntary = 0, involuntary = 0;
  context_switches(voluntary, involuntary);
  const double cpu = cpu_after - cpu_before_;
  if (voluntary == voluntary_before_ && involuntary == involuntary_before_) {
    cpu_before_ = cpu_after;
    wall_before_ = wall_after;
    return cpu;
  }
  const uint64_t run_queue_after = run_queue_wait_ns();
  const double ready = 1e-9 * static_cast<double>(run_queue_after - run_queue_before_ns_);
  run_queue_before_ns_ = run_queue_after;
  if (voluntary != voluntary_before_) {
    // Off the CPU by its own doing: the time not spent computing was spent waiting, less the time
    // spent ready for a CPU again.
    const double waited = (wall_after - wall_before_) - cpu - ready;
    voluntary_switches_ += voluntary - voluntary_before_;
    waited_max_seconds_ = std::max(waited_max_seconds_, waited);
    if (waited > 1e-3) ++calls_waiting_over_1ms_;
  }
  restart();  // after the file read, so that the next call is not charged with it
  return cpu;
}

void judge_waits(TestRecorder& t, const std::string& who, uint64_t calls,
                 uint64_t voluntary_switches, uint32_t calls_waiting_over_1ms,
                 double waited_max_seconds) {
  t.metrics() = {{"voluntary_switches", voluntary_switches},
                 {"calls_waiting_over_1ms", calls_waiting_over_1ms},
                 {"waited_max_us", waited_max_seconds * 1e6},
                 {"calls", calls}};
  const std::string text = fmt::format(
      "{} of {} calls waited over 1 ms (longest {:.1f} us); the thread gave up the CPU {} times",
      calls_waiting_over_1ms, calls, waited_max_seconds * 1e6, voluntary_switches);
  if (uint64_t{calls_waiting_over_1ms} * 100 > calls) {
    t.fail(text);
  } else if (calls_waiting_over_1ms > 0) {
    t.warn(text + " (a " + who + " should compute, not wait)");
  } else {
    t.note(text);
  }
}

}  // namespace headway::conformance
