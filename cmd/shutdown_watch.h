// `serve`'s SIGTERM/SIGINT from its first line on: a thread that takes every such signal, tells the
// serving thread to stop, and ends the process when the stop cannot end by itself.
//
// Start-up (loading the model, a router waiting for its engine processes) can take minutes, and
// nothing is in flight yet: the first signal asks start-up to stop (`stop_requested()`, which the
// router's wait polls; a model's load runs to its end), after which serve exits with 128 + the
// signal without serving; a second signal exits at once. Before, the signals stayed blocked until
// the frontends had started: a Ctrl-C did nothing, an orchestrator's SIGTERM waited out the load.
//
// Serving: the first signal starts the drain. An aborted request ends at its engine's next step,
// but one whose KV transfer never ends cannot: the host cannot take back blocks a transport may
// still write (docs/sdk.md), and the drain, or the teardown after it (a held-KV send whose peer
// died), would wait for it for ever. So:
// - draining: a second signal calls `cut_short` (the service aborts what is in flight); the drain
//   must then end within kAbortGraceS, else the process exits with status 1, saying why;
// - tearing down (frontends, engines, plugins): within kTeardownS, else the same;
// - a third signal at any point exits at once (128 + the signal).
// std::_Exit skips the rest of the teardown, which is what would wait.
//
// Threading: construct it on the thread that runs `serve`, after blocking the signals in every
// thread (the watch's thread waits for them with sigtimedwait). begin_serving(), wait_for_stop(),
// start_drain(), start_teardown() and the destructor are called from that thread; `cut_short`
// runs on the watch's thread, under the lock that start_teardown() also takes, so that it is never
// called once the teardown (which destroys the service) has begun.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace headway::cmd {

class ShutdownWatch {
 public:
  static constexpr double kAbortGraceS = 10.0;
  static constexpr double kTeardownS = 30.0;

  // Starts watching: start-up.
  explicit ShutdownWatch(const sigset_t& signals);
  ~ShutdownWatch();
  ShutdownWatch(const ShutdownWatch&) = delete;
  ShutdownWatch& operator=(const ShutdownWatch&) = delete;

  // Set by the first signal; a long start-up wait may poll it and give up.
  const std::atomic<bool>& stop_requested() const { return stop_requested_; }

  // Start-up is over. Returns false when a signal came during it: serve then stops without
  // serving (the teardown deadline runs) and exits with stop_status().
  bool begin_serving();
  // Blocks until the first signal (SIGTERM or SIGINT) and returns it.
  int wait_for_stop();
  // 128 + the first signal.
  int stop_status() const { return 128 + first_signal_.load(); }

  // After the first signal: the drain may take `drain_timeout_s`, then kAbortGraceS for its aborts.
  void start_drain(double drain_timeout_s, std::function<void()> cut_short);
  // The drain returned (or start-up stopped); from now on nothing may call the service.
  void start_teardown();

  // Whether a second signal cut the drain short.
  bool cut_short() const { return cut_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kStartingUp, kServing, kDraining, kTearingDown };

  static Clock::time_point from_now(double seconds);
  void set_deadline(double seconds);
  void watch();
  void on_signal(int signal);
  [[noreturn]] void exit_now(const char* why, int status) const;

  sigset_t signals_;
  std::mutex mutex_;
  std::condition_variable stopped_;   // the first signal, for wait_for_stop()
  Phase phase_ = Phase::kStartingUp;  // guarded by mutex_
  std::function<void()> cut_short_;   // guarded by mutex_
  bool cut_pending_ = false;          // a second signal before start_drain(); mutex_
  bool served_ = false;               // begin_serving() said yes; mutex_
  std::atomic<Clock::time_point> deadline_{Clock::time_point::max()};
  std::atomic<bool> stop_requested_{false};
  std::atomic<int> first_signal_{0};
  std::atomic<int> signals_seen_{0};
  std::atomic<bool> cut_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace headway::cmd
