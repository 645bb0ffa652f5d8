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
#include <cstddef>
#include <functional>
#include <memory>
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

// Whether a run's stop flag (borrowed; may be null: no stop) has been set.
inline bool stop_requested(const std::atomic<bool>* stop) {
  return stop != nullptr && stop->load();
}

struct DispatchResult {
  std::vector<double> lateness;  // per request, seconds between its scheduled time and its send
  size_t sent = 0;               // requests handed to a sender (the first `sent`)
  size_t sender_threads = 0;     // threads the pool grew to
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

}  // namespace headway::serving::bench
