// `serve`'s shutdown from its first SIGTERM/SIGINT on: a thread that takes the later signals and
// ends the process when the shutdown cannot end by itself.
//
// An aborted request ends at its engine's next step, but one whose KV transfer never ends cannot:
// the host cannot take back blocks a transport may still write (docs/sdk.md), and the drain, or
// the teardown after it (a held-KV send whose peer died), would wait for it for ever with every
// thread's SIGTERM and SIGINT blocked. So:
// - draining: a second signal calls `cut_short` (the service aborts what is in flight); the drain
//   must then end within kAbortGraceS, else the process exits with status 1, saying why;
// - tearing down (frontends, engines, plugins): within kTeardownS, else the same;
// - a third signal at any point exits at once (128 + the signal).
// std::_Exit skips the rest of the teardown, which is what would wait.
//
// Threading: start_drain(), start_teardown() and the destructor are called from the thread that
// runs `serve`; `cut_short` runs on the watch's thread, under a lock that start_teardown() also
// takes, so that it is never called once the teardown (which destroys the service) has begun.
#pragma once

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace headway::cmd {

class ShutdownWatch {
 public:
  static constexpr double kAbortGraceS = 10.0;
  static constexpr double kTeardownS = 30.0;

  explicit ShutdownWatch(const sigset_t& signals) : signals_(signals) {}
  ~ShutdownWatch() {
    finished_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  ShutdownWatch(const ShutdownWatch&) = delete;
  ShutdownWatch& operator=(const ShutdownWatch&) = delete;

  // After the first signal: the drain may take `drain_timeout_s`, then kAbortGraceS for its aborts.
  void start_drain(double drain_timeout_s, std::function<void()> cut_short) {
    cut_short_ = std::move(cut_short);
    set_deadline(drain_timeout_s + kAbortGraceS);
    thread_ = std::thread([this] { watch(); });
  }

  // The drain returned; from now on nothing may call the service.
  void start_teardown() {
    std::lock_guard lock(mutex_);
    tearing_down_ = true;
    set_deadline(kTeardownS);
  }

  // Whether a second signal cut the drain short.
  bool cut_short() const { return cut_.load(); }

 private:
  using Clock = std::chrono::steady_clock;

  void set_deadline(double seconds) {
    deadline_.store(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds)));
  }

  void watch() {
    signals_seen_.store(1);
    const timespec slice{0, 100'000'000};
    while (!finished_.load()) {
      const int next = sigtimedwait(&signals_, nullptr, &slice);
      if (next == SIGTERM || next == SIGINT) {
        const char* name = next == SIGTERM ? "SIGTERM" : "SIGINT";
        if (signals_seen_.fetch_add(1) >= 2) {
          std::fprintf(stderr, "headway serve: %s a third time: exiting now\n", name);
          std::fflush(stderr);
          std::_Exit(128 + next);
        }
        std::lock_guard lock(mutex_);
        if (tearing_down_) continue;  // the drain is over; the teardown deadline stands
        std::fprintf(stderr, "headway serve: %s again: aborting what is in flight now\n", name);
        std::fflush(stderr);
        cut_short_();
        cut_.store(true);
        deadline_.store(std::min(deadline_.load(),
                                 Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                    std::chrono::duration<double>(kAbortGraceS))));
        continue;
      }
      if (Clock::now() < deadline_.load() || finished_.load()) continue;
      bool tearing_down = false;
      {
        std::lock_guard lock(mutex_);
        tearing_down = tearing_down_;
      }
      if (tearing_down) {
        std::fprintf(stderr,
                     "headway serve: the shutdown did not end %.0f s after the drain (a KV "
                     "transfer whose poll() never ends, or a plugin that does not return, "
                     "holds it); exiting without waiting for it\n",
                     kTeardownS);
      } else {
        std::fprintf(stderr,
                     "headway serve: requests still in flight %.0f s after they were aborted (a "
                     "KV transfer whose poll() never ends, or an engine step whose model or "
                     "scheduler call does not return, holds them: see the warnings and the stats "
                     "lines above); exiting without waiting for them\n",
                     kAbortGraceS);
      }
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  sigset_t signals_;
  std::function<void()> cut_short_;
  std::mutex mutex_;
  bool tearing_down_ = false;  // guarded by mutex_
  std::atomic<Clock::time_point> deadline_{Clock::time_point::max()};
  std::atomic<int> signals_seen_{0};
  std::atomic<bool> cut_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace headway::cmd
