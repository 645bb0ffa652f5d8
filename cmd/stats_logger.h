// `headway serve`'s periodic stats line on stderr ([server] log_stats_interval_s): a thread that
// reads the service once per interval and prints serving::stats_line() of the difference, nothing
// while the server is idle.
//
// Ownership: borrows the service, which must outlive the logger. Threading: the logger's thread
// only calls the service's thread-safe getters; the destructor stops and joins it.
#pragma once

#include <headway/serving/generation_service.h>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace headway::cmd {

class StatsLogger {
 public:
  StatsLogger(const serving::GenerationService& service, double interval_seconds);
  ~StatsLogger();
  StatsLogger(const StatsLogger&) = delete;
  StatsLogger& operator=(const StatsLogger&) = delete;

 private:
  void run(double interval_seconds);

  const serving::GenerationService& service_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace headway::cmd
