// Says in the log that one call of `simulate`'s loop has run for long: an engine's step (its
// scheduler and its model), the router's route() or a KV transport's start or poll. simulate
// makes every plugin call on its one thread, so a call that never returned (a hung GPU, a
// scheduler waiting on a lock) left the command silent for ever; serve's engine threads have the
// stats line and /health for this.
//
// The first warning comes after `first_warning` seconds, then one each time the call's age doubles.
//
// Ownership: owns the watching thread; destroying the watch stops and joins it.
// Threading: began() and ended() come from one thread, the one making the calls (atomic stores,
// no lock, no allocation: they sit in the step loop); the watching thread only reads them.
#pragma once

#include <atomic>
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
  // Logs when the running call has passed its next warning; `seen` and `next_warning` are the
  // watching thread's memory of the call it last looked at.
  void check(uint64_t& seen, double& next_warning) const;
  // What runs ("engine3 has been in one step", ...), for the warning.
  std::string describe(Call call, uint32_t engine) const;

  const std::string run_name_;
  const double first_warning_;
  // The running call, written as a sequence lock: began() and ended() make `sequence_` odd while
  // they write and even after, so that the watcher skips a round whose fields it read half-written.
  // `began_ns_` is 0 while no call runs; an even `sequence_` names the call that began with it.
  std::atomic<uint64_t> sequence_{0};
  std::atomic<int64_t> began_ns_{0};
  std::atomic<uint32_t> engine_{0};
  std::atomic<Call> call_{Call::kStep};

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
