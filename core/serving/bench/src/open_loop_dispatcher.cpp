#include "headway/serving/bench/open_loop_dispatcher.h"

#include <headway/core/error.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>

namespace headway::serving::bench {

namespace {

class SenderPool {
 public:
  SenderPool(size_t max_threads, const RunClock& clock,
             const std::function<std::unique_ptr<RequestSender>()>& make_sender,
             const std::function<void(size_t)>& on_finished, std::vector<double>& lateness)
      : max_threads_(max_threads),
        clock_(clock),
        make_sender_(make_sender),
        on_finished_(on_finished),
        lateness_(lateness) {}

  ~SenderPool() { join_all(); }

  // Blocks while `max_threads` requests are in flight, then hands request `index` to a sender;
  // false when a sender failed or `stop` turned true meanwhile (nothing handed over).
  bool submit(size_t index, double scheduled, const std::atomic<bool>* stop) {
    std::unique_lock lock(mutex_);
    // Woken by finishing requests; the timeout notices a stop while every stream still runs.
    while (!slot_free_.wait_for(lock, std::chrono::milliseconds(50), [&] {
      return in_flight_ < max_threads_ || error_ || stop_requested(stop);
    })) {
    }
    if (error_ || stop_requested(stop)) return false;
    ++in_flight_;
    peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
    queue_.push_back({index, scheduled});
    if (idle_ < queue_.size() && threads_.size() < max_threads_) {
      threads_.emplace_back([this] { run_sender(); });
    }
    work_.notify_one();
    return true;
  }

  // Waits for every request, joins the threads, rethrows a sender's exception.
  void stop() {
    join_all();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  size_t threads_started() const { return threads_started_; }
  size_t peak_in_flight() const { return peak_in_flight_; }
  bool failed() {
    std::lock_guard lock(mutex_);
    return error_ != nullptr;
  }

 private:
  struct Due {
    size_t index;
    double scheduled;
  };

  void run_sender() {
    std::unique_ptr<RequestSender> sender;
    try {
      sender = make_sender_();
    } catch (...) {
      record_error(std::current_exception());
    }
    std::unique_lock lock(mutex_);
    ++threads_started_;
    while (true) {
      ++idle_;
      work_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      --idle_;
      if (queue_.empty()) return;  // stopping, nothing left
      const Due due = queue_.front();
      queue_.pop_front();
      lock.unlock();
      // Written before the send by this thread only; read after join().
      lateness_[due.index] = clock_.now() - due.scheduled;
      try {
        if (sender) sender->send(due.index);
        if (on_finished_) on_finished_(due.index);
      } catch (...) {
        record_error(std::current_exception());
      }
      lock.lock();
      --in_flight_;
      slot_free_.notify_one();
    }
  }

  void join_all() noexcept {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  void record_error(std::exception_ptr e) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::move(e);
    slot_free_.notify_all();
  }

  const size_t max_threads_;
  const RunClock& clock_;
  const std::function<std::unique_ptr<RequestSender>()>& make_sender_;
  const std::function<void(size_t)>& on_finished_;
  std::vector<double>& lateness_;

  std::mutex mutex_;
  std::condition_variable work_;       // a request is queued, or the pool stops
  std::condition_variable slot_free_;  // a request finished
  std::deque<Due> queue_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0, in_flight_ = 0, peak_in_flight_ = 0, threads_started_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

// Arrivals known up front, in order.
class FixedArrivals final : public SendQueue {
 public:
  explicit FixedArrivals(std::span<const double> arrivals) : arrivals_(arrivals) {}
  Look take_due(double now) override {
    Look look;
    look.exhausted = next_ >= arrivals_.size();
    if (look.exhausted) return look;
    if (arrivals_[next_] <= now) {
      look.taken = Due{next_, arrivals_[next_]};
      ++next_;
    } else {
      look.next_time = arrivals_[next_];
    }
    return look;
  }
  void wait_until(std::chrono::steady_clock::time_point deadline) override {
    std::this_thread::sleep_until(deadline);
  }

 private:
  std::span<const double> arrivals_;
  size_t next_ = 0;
};

}  // namespace

DispatchResult dispatch_open_loop(
    std::span<const double> arrivals, size_t max_concurrency, const RunClock& clock,
    const std::function<std::unique_ptr<RequestSender>()>& make_sender,
    const std::function<void(size_t)>& on_finished, const std::atomic<bool>* stop) {
  FixedArrivals queue(arrivals);
  return dispatch(queue, arrivals.size(), max_concurrency, clock, make_sender, on_finished, stop);
}

DispatchResult dispatch(SendQueue& queue, size_t requests, size_t max_concurrency,
                        const RunClock& clock,
                        const std::function<std::unique_ptr<RequestSender>()>& make_sender,
                        const std::function<void(size_t)>& on_finished,
                        const std::atomic<bool>* stop) {
  if (max_concurrency == 0) throw core::Error("--max-concurrency must be at least 1");
  DispatchResult result;
  result.lateness.assign(requests, std::numeric_limits<double>::quiet_NaN());
  result.handed.assign(requests, 0);
  SenderPool pool(max_concurrency, clock, make_sender, on_finished, result.lateness);
  while (true) {
    // Stopped, or a sender threw (stop() below rethrows it): send no more.
    if (stop_requested(stop) || pool.failed()) break;
    const SendQueue::Look look = queue.take_due(clock.now());
    if (!look.taken) {
      if (look.exhausted) break;
      // In slices of at most 50 ms, so that a stop is seen while the next send is minutes away;
      // a queue that learns of an earlier send wakes the wait sooner.
      const auto slice = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      queue.wait_until(look.next_time ? std::min(clock.at(*look.next_time), slice) : slice);
      continue;
    }
    const SendQueue::Due due = *look.taken;
    if (!pool.submit(due.index, due.time, stop)) break;
    result.handed[due.index] = 1;
    ++result.sent;
  }
  pool.stop();
  result.sender_threads = pool.threads_started();
  result.peak_in_flight = pool.peak_in_flight();
  return result;
}

}  // namespace headway::serving::bench
