// Counts the headway.v1.Headway calls in progress so that stopping the frontend can wait for them
// alone. gRPC's Server::Shutdown(deadline) waits for every open call, and the standard services'
// streams (a grpc.health.v1 Watch, which load balancers and Kubernetes probes hold open, server
// reflection) never end by themselves: each one held a stop for the whole grace period.
//
// Threading: any thread. A Pass is held by one call's handler for its duration.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace headway::serving::grpc_frontend {

class CallGate {
 public:
  // One call in progress. Converts to false once the gate is closed: the call must return at once
  // (it still counts until it does, which is harmless: it ends quickly).
  class Pass {
   public:
    explicit Pass(CallGate& gate) : gate_(gate) {
      std::lock_guard lock(gate_.mutex_);
      ++gate_.calls_;
      open_ = !gate_.closed_;
    }
    ~Pass() {
      std::lock_guard lock(gate_.mutex_);
      if (--gate_.calls_ == 0) gate_.idle_.notify_all();
    }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    explicit operator bool() const { return open_; }

   private:
    CallGate& gate_;
    bool open_ = false;
  };

  // Refuses every later call, then waits until the calls in progress have returned or `deadline`
  // passed (those left are cancelled by the server's shutdown).
  void close_and_wait(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    closed_ = true;
    idle_.wait_until(lock, deadline, [&] { return calls_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable idle_;
  size_t calls_ = 0;
  bool closed_ = false;
};

}  // namespace headway::serving::grpc_frontend
