// Sends requests at their scheduled times whatever the server does (an open loop): a slow server
// makes requests pile up in flight, it never delays the next arrival. Only the concurrency cap
// can hold a send back, and every send's lateness (send time - scheduled time) is measured.
//
// Why threads, and how many: cpp-httplib's client blocks for the whole stream, so every request
// in flight needs a thread. The dispatcher keeps a pool that grows on demand: a request due while
// no sender is idle starts a new sender thread, up to `max_concurrency`; a sender that finishes
// waits for the next request and keeps its connection (keep-alive). A steady load therefore runs
// on about as many threads as it has streams in flight, a burst of hundreds on hundreds, and no
// thread is created or destroyed per request. At the cap a due request waits for a sender to come
// free, and its lateness shows it.
//
// Threading: dispatch() blocks the calling thread until every request has finished; it calls
// `make_sender` and each sender only from that sender's own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "headway/serving/bench/run_clock.h"

namespace headway::serving::bench {

// One per sender thread, created and used on that thread only.
class RequestSender {
 public:
  virtual ~RequestSender() = default;
  // Sends request `index` and blocks until it is over. Should report failures in its own
  // results; an exception stops the run and is rethrown by dispatch().
  virtual void send(size_t index) = 0;
};

// What to send and when, asked by the dispatching thread. Fixed arrivals (dispatch_open_loop's)
// know every time up front; a schedule of conversations that wait for answers (bench_runner.cpp)
// learns of a later turn when the turn before ends on a sender thread.
class SendQueue {
 public:
  struct Due {
    size_t index;  // the request
    double time;   // when to send it, seconds on the run clock
  };
  struct Look {
    std::optional<Due> taken;         // the request to send now, taken from the queue
    std::optional<double> next_time;  // else when the earliest known one is due, if any is known
    bool exhausted = false;           // nothing is left to send, now or later
  };
  virtual ~SendQueue() = default;
  // Takes the earliest request whose time has come by `now` (run-clock seconds), or says when the
  // next is due. One step, so that a request the queue learns of meanwhile (on a sender thread)
  // cannot come between the look and the take.
  virtual Look take_due(double now) = 0;
  // Blocks until `deadline`, or sooner when next() may have changed.
  virtual void wait_until(std::chrono::steady_clock::time_point deadline) = 0;
};

// Whether a run's stop flag (borrowed; may be null: no stop) has been set.
inline bool stop_requested(const std::atomic<bool>* stop) {
  return stop != nullptr && stop->load();
}

struct DispatchResult {
  // Per request, seconds between its scheduled time and its send; NaN for one never handed to a
  // sender.
  std::vector<double> lateness;
  size_t sent = 0;  // requests handed to a sender (with fixed arrivals, the first `sent`)
  std::vector<uint8_t> handed;  // per request: 1 where it was handed to a sender
  size_t sender_threads = 0;    // threads the pool grew to
  size_t peak_in_flight = 0;
};

// Sends request i at clock.at(arrivals[i]); `arrivals` must be ascending (a workload's order).
// `max_concurrency` >= 1 (throws core::Error otherwise). `on_finished`, when set, is called on the
// sender thread after each request; it must be thread-safe. `stop` (borrowed; may be null), once
// true, ends the sending within about 50 ms (the senders' streams are theirs to end); the
// requests sent so far still finish before dispatch returns.
DispatchResult dispatch_open_loop(
    std::span<const double> arrivals, size_t max_concurrency, const RunClock& clock,
    const std::function<std::unique_ptr<RequestSender>()>& make_sender,
    const std::function<void(size_t)>& on_finished = {}, const std::atomic<bool>* stop = nullptr);

// The same, sending what `queue` says when it says (`requests`: how many it may name; lateness
// has that size). Sends stop when the queue is exhausted, at `stop`, or when a sender throws.
DispatchResult dispatch(SendQueue& queue, size_t requests, size_t max_concurrency,
                        const RunClock& clock,
                        const std::function<std::unique_ptr<RequestSender>()>& make_sender,
                        const std::function<void(size_t)>& on_finished = {},
                        const std::atomic<bool>* stop = nullptr);

}  // namespace headway::serving::bench
