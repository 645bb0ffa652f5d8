#include "in_flight_requests.h"

namespace headway::serving::http {

std::optional<InFlightRequests::Ticket> InFlightRequests::enter() {
  std::lock_guard lock(mutex_);
  if (stopping_.load()) return std::nullopt;
  ++count_;
  return std::optional<Ticket>(std::in_place, *this);
}

void InFlightRequests::leave() {
  std::lock_guard lock(mutex_);
  if (--count_ == 0) idle_.notify_all();
}

void InFlightRequests::stop_and_wait() {
  std::unique_lock lock(mutex_);
  stopping_.store(true);
  idle_.wait(lock, [&] { return count_ == 0; });
}

}  // namespace headway::serving::http
