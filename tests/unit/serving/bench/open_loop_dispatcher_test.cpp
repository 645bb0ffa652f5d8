#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/serving/bench/open_loop_dispatcher.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace headway::serving::bench {
namespace {

// Senders that block until the test lets them go, so that the test controls what is in flight.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  size_t in_flight = 0, peak = 0, started = 0;
  bool open = false;
  std::vector<size_t> sent;  // indices, in the order sends began
};

class GatedSender final : public RequestSender {
 public:
  explicit GatedSender(Gate& gate) : gate_(gate) {}
  void send(size_t index) override {
    std::unique_lock lock(gate_.mutex);
    gate_.sent.push_back(index);
    ++gate_.started;
    gate_.peak = std::max(gate_.peak, ++gate_.in_flight);
    gate_.changed.notify_all();
    gate_.changed.wait(lock, [&] { return gate_.open; });
    --gate_.in_flight;
  }

 private:
  Gate& gate_;
};

TEST(OpenLoopDispatcher, SendsWithoutWaitingForEarlierRequestsUpToTheCap) {
  Gate gate;
  const std::vector<double> arrivals(6, 0.0);
  const RunClock clock;
  DispatchResult result;
  std::thread run([&] {
    result =
        dispatch_open_loop(arrivals, 4, clock, [&] { return std::make_unique<GatedSender>(gate); });
  });
  {
    // Four requests are in flight at once although none has finished: the loop is open. The
    // cap holds the other two back.
    std::unique_lock lock(gate.mutex);
    gate.changed.wait(lock, [&] { return gate.in_flight == 4; });
    EXPECT_EQ(gate.started, 4u);
    gate.open = true;
    gate.changed.notify_all();
  }
  run.join();
  EXPECT_EQ(gate.started, 6u);
  EXPECT_EQ(gate.peak, 4u);
  EXPECT_EQ(result.peak_in_flight, 4u);
  EXPECT_LE(result.sender_threads, 4u);
  EXPECT_EQ(result.lateness.size(), 6u);
  std::vector<size_t> sorted = gate.sent;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  for (double l : result.lateness) EXPECT_GE(l, 0.0);
}

TEST(OpenLoopDispatcher, OneSenderSendsInArrivalOrderOnOneThread) {
  Gate gate;
  gate.open = true;
  const std::vector<double> arrivals{0.0, 0.0, 0.001, 0.002, 0.002};
  const RunClock clock;
  std::atomic<size_t> finished{0};
  const DispatchResult result = dispatch_open_loop(
      arrivals, 1, clock, [&] { return std::make_unique<GatedSender>(gate); },
      [&](size_t) { ++finished; });
  EXPECT_EQ(gate.sent, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(result.sender_threads, 1u);
  EXPECT_EQ(finished.load(), 5u);
}

class ThrowingSender final : public RequestSender {
 public:
  void send(size_t index) override {
    if (index == 1) throw std::runtime_error("sender bug");
  }
};

TEST(OpenLoopDispatcher, ASenderExceptionStopsTheRunAndIsRethrown) {
  const std::vector<double> arrivals(5, 0.0);
  const RunClock clock;
  EXPECT_THROW(
      dispatch_open_loop(arrivals, 2, clock, [] { return std::make_unique<ThrowingSender>(); }),
      std::runtime_error);
  EXPECT_THROW(
      dispatch_open_loop(arrivals, 0, clock, [] { return std::make_unique<ThrowingSender>(); }),
      core::Error);
}

}  // namespace
}  // namespace headway::serving::bench
