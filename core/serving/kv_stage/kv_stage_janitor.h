// Removes the staged KV objects that nobody read in time: this process's (the router gave the
// request up before a decode process asked for it, or the decode process died first), and those of
// engine processes that have exited (a prefill process that crashed). Without it such an object
// would stay in /dev/shm (host memory) until its writer exits and another engine process starts
// (sweep_orphaned_kv_stages()).
//
// Ownership: owns one thread, stopped and joined by the destructor. Threading: the constructor and
// destructor on one thread; the sweep runs on its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace headway::serving {

// How long a staged object may wait for its reader. Generous: a decode process reads it when its
// request gets KV blocks, which can take a while under load (an object removed too early costs a
// prefill on the decode engine, not an error).
inline constexpr std::chrono::seconds kStagedKvLifetime{120};

class KvStageJanitor {
 public:
  // Sweeps every `period` for objects older than `lifetime`.
  explicit KvStageJanitor(std::chrono::milliseconds period = std::chrono::seconds(10),
                          std::chrono::seconds lifetime = kStagedKvLifetime);
  ~KvStageJanitor();
  KvStageJanitor(const KvStageJanitor&) = delete;
  KvStageJanitor& operator=(const KvStageJanitor&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: started after the members it uses
};

}  // namespace headway::serving
