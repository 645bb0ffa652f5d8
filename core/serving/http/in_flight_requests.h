// Counts the generation requests a frontend is serving, so that stop() can first tell them to end
// (each aborts its request and sends its client an error) and wait until they have, before the
// server closes its connections.
//
// Ownership: a Ticket refers to its InFlightRequests, which must outlive it. Threading: every
// method is safe from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <utility>

namespace headway::serving::http {

class InFlightRequests {
 public:
  // Held while one request is served; leaving is the ticket's destruction.
  class Ticket {
   public:
    explicit Ticket(InFlightRequests& owner) : owner_(&owner) {}
    Ticket(Ticket&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Ticket& operator=(Ticket&&) = delete;
    Ticket(const Ticket&) = delete;
    ~Ticket() {
      if (owner_ != nullptr) owner_->leave();
    }

   private:
    InFlightRequests* owner_;
  };

  // A ticket, or nothing once stopping.
  std::optional<Ticket> enter();

  // Polled by the requests being served: true once stop_and_wait() began.
  const std::atomic<bool>& stopping() const { return stopping_; }

  // Tells every request to end and returns once none is left.
  void stop_and_wait();

 private:
  void leave();

  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable idle_;
  size_t count_ = 0;
};

}  // namespace headway::serving::http
