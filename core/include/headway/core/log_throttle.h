// How often a repeated problem is logged: the first time, then at most once every `every`, with
// the number of occurrences not logged in between, so that a plugin failing on every request or
// step does not flood the log.
//
// Ownership: a value. Threading: one thread at a time (its owner's lock or thread).
#pragma once

#include <chrono>
#include <cstdint>

namespace headway::core {

class LogThrottle {
 public:
  explicit LogThrottle(std::chrono::steady_clock::duration every) : every_(every) {}

  // Whether to log this occurrence now; when so, `skipped` gets the occurrences not logged since
  // the last line.
  bool due(uint64_t& skipped) {
    const auto now = std::chrono::steady_clock::now();
    if (logged_ && now - last_ < every_) {
      ++unlogged_;
      return false;
    }
    skipped = unlogged_;
    logged_ = true;
    last_ = now;
    unlogged_ = 0;
    return true;
  }

 private:
  std::chrono::steady_clock::duration every_;
  std::chrono::steady_clock::time_point last_{};
  bool logged_ = false;
  uint64_t unlogged_ = 0;
};

}  // namespace headway::core
