// Says in the log that one call of `simulate`'s loop has run for long: an engine's step (its
// scheduler and its model), the router's route() or a KV transport's start or poll. simulate
// makes every plugin call on its one thread, so a call that never returned (a hung GPU, a
// scheduler waiting on a lock) left the command silent for ever; serve's engine threads have the
// stats line and /health for this.
//
// The first warning comes after `first_warning` seconds, then one each time the call's age doubles.
// The age is the watcher's: from the first time it saw the call running (at most a quarter of the
// first warning's time, or 1 s, after it began), so that the loop reads no clock.
//
// Ownership: owns the watching thread; destroying the watch stops and joins it.
// Threading: began() and ended() come from one thread, the one making the calls (one relaxed
// atomic store each, no lock, no allocation: they sit in the step loop); the watching thread only
// reads that atomic.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace headway::core {

class LongCallWatch {
 public:
  enum class Call : uint8_t { kStep, kRoute, kTransport };

  // `run_name` starts each warning (the deployment's name and the run's label).
  LongCallWatch(std::string run_name, double first_warning_seconds);
  ~LongCallWatch();
  LongCallWatch(const LongCallWatch&) = delete;
  LongCallWatch& operator=(const LongCallWatch&) = delete;

  // `engine` names the engine of a step; it is not read for the other calls.
  void began(Call call, uint32_t engine);
  void ended();

 private:
  void watch();
  // What the watching thread remembers of the call it last saw running.
  struct Seen {
    uint64_t state = 0;  // state_ then (its sequence names the call)
    std::chrono::steady_clock::time_point since{};
    double next_warning = 0;
  };
  // Logs when the running call has passed its next warning.
  void check(Seen& seen) const;
  // What runs ("engine3 has been in one step", ...), for the warning.
  std::string describe(Call call, uint32_t engine) const;

  const std::string run_name_;
  const double first_warning_;
  // The call of the moment in one word, so that the watcher never reads half of it: bits 0-31 the
  // engine, 32-39 the Call, bit 40 set while it runs, 41-63 a count of began() that tells one call
  // from the next (it wraps after 2^23 calls, which no watcher's second sees). Written by began()
  // and ended() only; `last_` is their copy of it.
  std::atomic<uint64_t> state_{0};
  uint64_t last_ = 0;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // under mutex_
  std::thread watcher_;
};

// Marks one call for a watch that may be null: began() now, ended() when it goes out of scope.
class WatchedCall {
 public:
  WatchedCall(LongCallWatch* watch, LongCallWatch::Call call, uint32_t engine = 0) : watch_(watch) {
    if (watch_ != nullptr) watch_->began(call, engine);
  }
  ~WatchedCall() {
    if (watch_ != nullptr) watch_->ended();
  }
  WatchedCall(const WatchedCall&) = delete;
  WatchedCall& operator=(const WatchedCall&) = delete;

 private:
  LongCallWatch* watch_;
};

}  // namespace headway::core
