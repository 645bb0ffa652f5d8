// Requests routed to a decode engine that have not reached it yet: still prefilling on another
// engine, or waiting there to be handed over. The decode engine's load counts them, so that a
// burst of disaggregated requests spreads over the decode engines instead of all landing on the
// one that looked least loaded before any of them arrived (helper-170: 20 of 20 on one of two).
// The simulator's Cluster keeps the same count in its own map (one thread there).
//
// Ownership: ExpectedHandoffs is shared by the decode engine's driver (which reads it into its
// load) and by the ExpectedHandoff of each request headed there, so either may outlive the other.
// Threading: lock-free; any thread may count a request in or out.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

namespace headway::serving {

struct ExpectedHandoffs {
  std::atomic<uint32_t> requests{0};
  std::atomic<uint64_t> tokens{0};  // the output tokens they will decode there
};

// One request's place in a decode engine's ExpectedHandoffs: counted in when made, counted out by
// settle() (its hand-off reached that engine) or, whatever else ends it (a finish with its first
// token, an abort, a failure, a driver that exited), by its destructor. Move-only.
class ExpectedHandoff {
 public:
  ExpectedHandoff() = default;
  ExpectedHandoff(std::shared_ptr<ExpectedHandoffs> at, uint64_t tokens)
      : at_(std::move(at)), tokens_(tokens) {
    at_->requests.fetch_add(1);
    at_->tokens.fetch_add(tokens_);
  }
  ExpectedHandoff(ExpectedHandoff&& other) noexcept
      : at_(std::move(other.at_)), tokens_(other.tokens_) {}
  ExpectedHandoff& operator=(ExpectedHandoff&& other) noexcept {
    if (this != &other) {
      settle();
      at_ = std::move(other.at_);
      tokens_ = other.tokens_;
    }
    return *this;
  }
  ExpectedHandoff(const ExpectedHandoff&) = delete;
  ExpectedHandoff& operator=(const ExpectedHandoff&) = delete;
  ~ExpectedHandoff() { settle(); }

  // Counts the request out (once; later calls do nothing).
  void settle() {
    if (at_ == nullptr) return;
    at_->requests.fetch_sub(1);
    at_->tokens.fetch_sub(tokens_);
    at_.reset();
  }

 private:
  std::shared_ptr<ExpectedHandoffs> at_;
  uint64_t tokens_ = 0;
};

}  // namespace headway::serving
