#include "shutdown_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace headway::cmd {

namespace {

const char* signal_name(int signal) { return signal == SIGTERM ? "SIGTERM" : "SIGINT"; }

}  // namespace

ShutdownWatch::ShutdownWatch(const sigset_t& signals)
    : signals_(signals), thread_([this] { watch(); }) {}

ShutdownWatch::~ShutdownWatch() {
  finished_.store(true);
  thread_.join();
}

bool ShutdownWatch::begin_serving() {
  std::lock_guard lock(mutex_);
  if (stop_requested_.load()) return false;
  phase_ = Phase::kServing;
  served_ = true;
  return true;
}

int ShutdownWatch::wait_for_stop() {
  std::unique_lock lock(mutex_);
  stopped_.wait(lock, [this] { return stop_requested_.load(); });
  return first_signal_.load();
}

void ShutdownWatch::start_drain(double drain_timeout_s, std::function<void()> cut_short) {
  std::lock_guard lock(mutex_);
  cut_short_ = std::move(cut_short);
  phase_ = Phase::kDraining;
  set_deadline(cut_pending_ ? kAbortGraceS : drain_timeout_s + kAbortGraceS);
  // A second signal that came before the drain began.
  if (cut_pending_) cut_short_();
}

void ShutdownWatch::start_teardown() {
  std::lock_guard lock(mutex_);
  phase_ = Phase::kTearingDown;
  set_deadline(kTeardownS);
}

ShutdownWatch::Clock::time_point ShutdownWatch::from_now(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void ShutdownWatch::set_deadline(double seconds) { deadline_.store(from_now(seconds)); }

void ShutdownWatch::exit_now(const char* why, int status) const {
  std::fprintf(stderr, "headway serve: %s\n", why);
  std::fflush(stderr);
  std::_Exit(status);
}

void ShutdownWatch::on_signal(int signal) {
  const char* name = signal_name(signal);
  if (signals_seen_.fetch_add(1) >= 2) {
    exit_now(fmt::format("{} a third time: exiting now", name).c_str(), 128 + signal);
  }
  std::lock_guard lock(mutex_);
  if (!stop_requested_.load()) {
    first_signal_.store(signal);
    stop_requested_.store(true);
    if (phase_ == Phase::kStartingUp) {
      std::fprintf(stderr,
                   "headway serve: %s during start-up: stopping without serving once what is "
                   "loading returns (send it again to exit now)\n",
                   name);
      std::fflush(stderr);
    }
    stopped_.notify_all();
    return;
  }
  switch (phase_) {
    case Phase::kStartingUp:
      exit_now(fmt::format("{} again during start-up: exiting now", name).c_str(), 128 + signal);
    case Phase::kServing:
    case Phase::kDraining:
      std::fprintf(stderr, "headway serve: %s again: aborting what is in flight now\n", name);
      std::fflush(stderr);
      cut_.store(true);
      if (phase_ == Phase::kServing) {
        cut_pending_ = true;  // start_drain() cuts it short as it begins
        return;
      }
      cut_short_();
      deadline_.store(std::min(deadline_.load(), from_now(kAbortGraceS)));
      return;
    case Phase::kTearingDown:
      // Stopping after start-up: nothing was in flight, and "a second exits at once" holds.
      if (!served_) {
        exit_now(fmt::format("{} again while stopping after start-up: exiting now", name).c_str(),
                 128 + signal);
      }
      return;  // the drain is over; the teardown deadline stands
  }
}

void ShutdownWatch::watch() {
  const timespec slice{0, 100'000'000};
  while (!finished_.load()) {
    const int next = sigtimedwait(&signals_, nullptr, &slice);
    if (next == SIGTERM || next == SIGINT) {
      on_signal(next);
      continue;
    }
    if (Clock::now() < deadline_.load() || finished_.load()) continue;
    bool tearing_down = false;
    bool served = false;
    {
      // Again under the lock: start_teardown() may just have set a later deadline.
      std::lock_guard lock(mutex_);
      if (Clock::now() < deadline_.load()) continue;
      tearing_down = phase_ == Phase::kTearingDown;
      served = served_;
    }
    if (tearing_down && !served) {
      exit_now(fmt::format("stopping after start-up did not end within {:.0f} s (a plugin that "
                           "does not return holds it); exiting without waiting for it",
                           kTeardownS)
                   .c_str(),
               1);
    }
    if (tearing_down) {
      exit_now(fmt::format("the shutdown did not end {:.0f} s after the drain (a KV transfer "
                           "whose poll() never ends, or a plugin that does not return, holds "
                           "it); exiting without waiting for it",
                           kTeardownS)
                   .c_str(),
               1);
    }
    exit_now(fmt::format("requests still in flight {:.0f} s after they were aborted (a KV "
                         "transfer whose poll() never ends, or an engine step whose model or "
                         "scheduler call does not return, holds them: see the warnings and the "
                         "stats lines above); exiting without waiting for them",
                         kAbortGraceS)
                 .c_str(),
             1);
  }
}

}  // namespace headway::cmd
