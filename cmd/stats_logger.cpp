#include "stats_logger.h"

#include <headway/serving/stats_line.h>

#include <chrono>
#include <cstdio>

namespace headway::cmd {
namespace {

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

StatsLogger::StatsLogger(const serving::GenerationService& service, double interval_seconds)
    : service_(service), thread_([this, interval_seconds] { run(interval_seconds); }) {}

StatsLogger::~StatsLogger() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StatsLogger::run(double interval_seconds) {
  const auto interval = std::chrono::duration<double>(interval_seconds);
  serving::StatsSample before = serving::take_stats_sample(service_, monotonic_seconds());
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();  // the service's getters take their own locks
    const serving::StatsSample now = serving::take_stats_sample(service_, monotonic_seconds());
    const std::string line = serving::stats_line(before, now);
    if (!line.empty()) {
      std::fprintf(stderr, "headway serve: %s\n", line.c_str());
      std::fflush(stderr);
    }
    before = now;
    lock.lock();
  }
}

}  // namespace headway::cmd
