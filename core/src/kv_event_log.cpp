#include <headway/core/kv_event_log.h>

#include <algorithm>

namespace headway::core {

KvEventLog::KvEventLog(size_t capacity) : capacity_(std::max<size_t>(capacity, 2)) {
  events_.reserve(capacity_);
}

void KvEventLog::push(uint64_t piece_hash, int32_t kind) {
  if (kind == HW_KV_EVENT_ALL_REMOVED) {
    events_.clear();  // whatever they said, the reader forgets it
  } else if (events_.size() == capacity_) {
    // Dropping any one event would leave a reader believing a piece held that is gone, or gone
    // that is held; forgetting all of them only costs the reader its beliefs about this engine.
    events_.clear();
    events_.push_back(hw_kv_event{0, HW_KV_EVENT_ALL_REMOVED, 0});
    ++overflows_;
  }
  events_.push_back(hw_kv_event{piece_hash, kind, 0});
}

void KvEventLog::move_into(std::vector<hw_kv_event>& out) {
  out.insert(out.end(), events_.begin(), events_.end());
  events_.clear();
}

}  // namespace headway::core
