#include "kv_event_feed.h"

#include <algorithm>

namespace headway::serving {

KvEventFeed::KvEventFeed(size_t capacity)
    : capacity_(std::max<size_t>(capacity, 1)), ring_(capacity_) {}

void KvEventFeed::append(std::span<const hw_kv_event> events) {
  for (const hw_kv_event& event : events) ring_[next_++ % capacity_] = event;
}

KvEventsSince KvEventFeed::since(uint64_t from) const {
  KvEventsSince read;
  const uint64_t oldest = next_ - std::min<uint64_t>(next_, capacity_);
  // Past the end: a reader of another incarnation of this process, whose numbers went further.
  if (from < oldest || from > next_) {
    read.lost = true;
    from = oldest;
  }
  read.events.reserve(next_ - from);
  for (uint64_t n = from; n < next_; ++n) read.events.push_back(ring_[n % capacity_]);
  read.next = next_;
  return read;
}

}  // namespace headway::serving
