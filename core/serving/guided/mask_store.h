// The allowed sets of one compiled grammar's places, shared by every request that uses the
// grammar (GuideFactory hands them the same store), so that a place one request walked is a
// lookup for the next. A set here is the vocabulary walk's result alone: each request adds its own
// end tokens (grammar_guide.cpp).
//
// Bounded: at most `capacity` sets (vocab / 8 bytes each); when full it starts over, so that a
// grammar whose places never repeat (length limits, counters) cannot grow it.
// Ownership: sets are shared with the guides that hold them while they use them.
// Threading: safe from any thread (the engine threads of a process share it); the lock covers a
// hash lookup or insert, never a walk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace headway::serving::guided {

class MaskStore {
 public:
  using Mask = std::shared_ptr<const std::vector<uint64_t>>;

  explicit MaskStore(size_t capacity) : capacity_(capacity) {}

  // The set kept for `place`, or null.
  Mask find(const std::string& place) const {
    std::lock_guard lock(mutex_);
    const auto found = masks_.find(place);
    return found == masks_.end() ? nullptr : found->second;
  }

  void keep(const std::string& place, Mask mask) {
    std::lock_guard lock(mutex_);
    if (masks_.count(place) != 0) return;  // another request walked it meanwhile
    if (masks_.size() >= capacity_) masks_.clear();
    masks_.emplace(place, std::move(mask));
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return masks_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Mask> masks_;
  size_t capacity_;
};

}  // namespace headway::serving::guided
