// The bookkeeping the faulty KV transports share: each copies a transfer synchronously in start()
// and keeps its outcome here until poll() takes it. Threading: any thread (a mutex inside).
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

class FinishedTransfers {
 public:
  // Keeps `ok` under a new handle, which it returns.
  uint64_t add(bool ok) {
    std::lock_guard lock(mutex_);
    results_[next_] = ok;
    return next_++;
  }
  // The outcome kept under `handle`, forgotten now; std::out_of_range (HW_INTERNAL through the
  // SDK's firewall) for a handle it does not keep.
  bool take(uint64_t handle) {
    std::lock_guard lock(mutex_);
    const bool ok = results_.at(handle);
    results_.erase(handle);
    return ok;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<uint64_t, bool> results_;
  uint64_t next_ = 1;
};
