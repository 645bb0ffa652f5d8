// An engine process's KV events (hw_kv_event, ABI 1.9) for the router processes that ask for them
// in ClusterInfo: numbered, the most recent kept, so that each reader asks for those after the
// last it read and learns when some it has not read are gone (it then forgets what it believed
// the process holds). Several readers may read the same events; none consumes them.
//
// Ownership: owns its events. Threading: not synchronised; LocalGenerationService calls it under
// its own lock.
#pragma once

#include <headway/abi.h>
#include <headway/serving/generation_service.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace headway::serving {

class KvEventFeed {
 public:
  explicit KvEventFeed(size_t capacity);

  void append(std::span<const hw_kv_event> events);

  // The events from number `from` on (0: the first ever), as many as are kept; lost where some
  // after `from` are gone, or `from` is past the last (a reader of another incarnation).
  KvEventsSince since(uint64_t from) const;

 private:
  size_t capacity_;
  std::vector<hw_kv_event> ring_;  // event n at n % capacity_
  uint64_t next_ = 0;              // the number of the next event appended
};

}  // namespace headway::serving
