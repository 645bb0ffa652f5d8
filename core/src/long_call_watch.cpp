#include <headway/core/long_call_watch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace headway::core {

namespace {

constexpr int kCallShift = 32;
constexpr uint64_t kRunning = uint64_t{1} << 40;
constexpr int kCountShift = 41;

}  // namespace

LongCallWatch::LongCallWatch(std::string run_name, double first_warning_seconds)
    : run_name_(std::move(run_name)),
      first_warning_(first_warning_seconds),
      watcher_([this] { watch(); }) {}

LongCallWatch::~LongCallWatch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

void LongCallWatch::began(Call call, uint32_t engine) {
  const uint64_t count = (last_ >> kCountShift) + 1;
  last_ = (count << kCountShift) | kRunning |
          (static_cast<uint64_t>(static_cast<uint8_t>(call)) << kCallShift) | engine;
  state_.store(last_, std::memory_order_relaxed);
}

void LongCallWatch::ended() {
  last_ &= ~kRunning;
  state_.store(last_, std::memory_order_relaxed);
}

void LongCallWatch::watch() {
  // Often enough that the first warning comes within a quarter of its time late.
  const std::chrono::duration<double> period(std::min(1.0, first_warning_ / 4));
  Seen seen;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) check(seen);
}

void LongCallWatch::check(Seen& seen) const {
  const uint64_t state = state_.load(std::memory_order_relaxed);
  const auto now = std::chrono::steady_clock::now();
  if ((state & kRunning) == 0) return;
  if (state != seen.state) {  // another call than the last one seen running
    seen = Seen{state, now, first_warning_};
    return;
  }
  const double age = std::chrono::duration<double>(now - seen.since).count();
  if (age < seen.next_warning) return;
  while (seen.next_warning <= age) seen.next_warning *= 2;
  const auto call = static_cast<Call>(static_cast<uint8_t>(state >> kCallShift));
  const auto engine = static_cast<uint32_t>(state);
  spdlog::warn("{}: {} for {:.{}f} s; simulate waits for it (Ctrl-C ends the run)", run_name_,
               describe(call, engine), age, age < 10 ? 1 : 0);
}

std::string LongCallWatch::describe(Call call, uint32_t engine) const {
  switch (call) {
    case Call::kStep:
      return fmt::format("engine{} has been in one step (its scheduler or model)", engine);
    case Call::kRoute:
      return "the router's route() has not returned";
    case Call::kTransport:
      return "a call of the KV transport (a transfer's start or poll) has not returned";
  }
  return "a plugin call has not returned";
}

}  // namespace headway::core
