// The two clocks one engine loop runs on. A simulated model reports each step's duration and the
// virtual clock jumps by it (no sleeping); a real model takes wall time, which the wall clock
// reads. Schedulers and routers only ever see now(), so they cannot tell which clock drives them.
//
// Threading: a clock belongs to one engine (or one simulation) and is read and advanced by its
// thread; now() of the wall clock may be called from any thread.
#pragma once

#include <chrono>

namespace headway::core {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now() const = 0;
  // Accounts for a step that took `seconds`: the virtual clock moves; wall time already has.
  virtual void advance(double seconds) = 0;
  virtual bool is_virtual() const = 0;
  // An idle engine waits for its next event at time t: the virtual clock jumps there (never back);
  // the wall clock has nothing to do, since real waiting happens in the driver.
  virtual void advance_to(double t) = 0;
};

class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(double start = 0.0) : now_(start) {}
  double now() const override { return now_; }
  void advance(double seconds) override { now_ += seconds; }
  bool is_virtual() const override { return true; }
  void advance_to(double t) override {
    if (t > now_) now_ = t;
  }

 private:
  double now_;
};

class WallClock final : public Clock {
 public:
  WallClock() : origin_(std::chrono::steady_clock::now()) {}
  // Clocks of one process share an origin so that their readings compare.
  explicit WallClock(std::chrono::steady_clock::time_point origin) : origin_(origin) {}
  double now() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
  }
  void advance(double) override {}
  bool is_virtual() const override { return false; }
  void advance_to(double) override {}

 private:
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace headway::core
