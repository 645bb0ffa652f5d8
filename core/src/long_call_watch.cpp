#include <headway/core/long_call_watch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace headway::core {

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
  sequence_.fetch_add(1);
  call_.store(call);
  engine_.store(engine);
  began_ns_.store(steady_ns());
  sequence_.fetch_add(1);
}

void LongCallWatch::ended() {
  sequence_.fetch_add(1);
  began_ns_.store(0);
  sequence_.fetch_add(1);
}

void LongCallWatch::watch() {
  // Often enough that the first warning comes within a quarter of its time late.
  const std::chrono::duration<double> period(std::min(1.0, first_warning_ / 4));
  uint64_t seen = 0;
  double next_warning = first_warning_;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) check(seen, next_warning);
}

void LongCallWatch::check(uint64_t& seen, double& next_warning) const {
  const uint64_t sequence = sequence_.load();
  if (sequence % 2 == 1) return;
  const int64_t began = began_ns_.load();
  const Call call = call_.load();
  const uint32_t engine = engine_.load();
  if (sequence_.load() != sequence || began == 0) return;
  if (sequence != seen) {
    seen = sequence;
    next_warning = first_warning_;
  }
  const double age = static_cast<double>(steady_ns() - began) * 1e-9;
  if (age < next_warning) return;
  while (next_warning <= age) next_warning *= 2;
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
