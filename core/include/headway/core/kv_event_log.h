// What an engine's prefix cache stored and evicted since a router last read it (hw_kv_event, ABI
// 1.9), in the hashes of route prefixes: a router that keeps them knows what each cache holds
// instead of guessing it from where it sent requests.
//
// Bounded: a log that would pass its capacity (nobody read it for a long while) drops what it
// holds and starts again with HW_KV_EVENT_ALL_REMOVED, so the reader forgets that engine's pieces
// rather than keep beliefs the dropped events would have changed. The storage is reserved once:
// no allocation while it is filled and drained.
//
// Ownership: owns its events. Threading: one thread at a time (the engine's; a serving driver
// moves them out under its own lock).
#pragma once

#include <headway/abi.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace headway::core {

class KvEventLog {
 public:
  explicit KvEventLog(size_t capacity);

  // Logs one event (kind: hw_kv_event_kind). An ALL_REMOVED drops what the log holds before it.
  void push(uint64_t piece_hash, int32_t kind);
  // Appends another log's events (moved out of it), in order.
  void append(std::span<const hw_kv_event> events) {
    for (const hw_kv_event& event : events) push(event.piece_hash, event.kind);
  }

  // Appends the events to `out`, oldest first, and empties the log. `out` keeps its capacity
  // from call to call; it grows only the first times.
  void move_into(std::vector<hw_kv_event>& out);

  bool empty() const { return events_.empty(); }
  size_t capacity() const { return capacity_; }
  // Times the log dropped its events for want of room.
  uint64_t overflows() const { return overflows_; }

 private:
  size_t capacity_;
  std::vector<hw_kv_event> events_;
  uint64_t overflows_ = 0;
};

}  // namespace headway::core
