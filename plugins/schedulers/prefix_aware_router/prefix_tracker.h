// What one engine's prefix cache is believed to hold, as the prefix_aware router keeps it: the
// prompt beginnings (hashes of hw_route_prefix) of the requests it sent there, the most recently
// sent kept, up to a capacity in pieces.
//
// A belief, not the engine's state: the router sees no eviction, and an engine with prefix caching
// off holds nothing. A wrong belief costs only a request placed where its beginning is computed
// again, the cost of any router that does not track prefixes.
//
// Ownership: owns its entries. Threading: one router instance's; not synchronised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>

namespace headway::routers {

class PrefixTracker {
 public:
  // How many of `hashes`, from the first, it holds: the pieces of the prompt's beginning the
  // engine is believed to hold, up to the first it does not.
  size_t matched(std::span<const uint64_t> hashes) const {
    size_t n = 0;
    while (n < hashes.size() && entries_.count(hashes[n]) != 0) ++n;
    return n;
  }

  // Records that a prompt beginning so was sent to the engine: each piece becomes the most
  // recently used, the first most of all, so that the pieces evicted first (past the capacity)
  // are the deepest ones. The engine's cache also evicts a request's last blocks first, keeping
  // beginnings that others share.
  void record(std::span<const uint64_t> hashes) {
    for (size_t i = hashes.size(); i-- > 0;) {
      const auto [it, inserted] = entries_.try_emplace(hashes[i]);
      if (inserted) {
        order_.push_front(hashes[i]);
        it->second = order_.begin();
      } else {
        order_.splice(order_.begin(), order_, it->second);  // no allocation for a piece held
      }
    }
    evict_past(capacity_);
  }

  // The most pieces held; the least recently sent go first when it shrinks.
  void set_capacity(size_t pieces) {
    capacity_ = pieces;
    evict_past(capacity_);
  }
  size_t capacity() const { return capacity_; }
  size_t size() const { return entries_.size(); }

  // Forgets everything (the engine went down: its cache is gone when it comes back).
  void clear() {
    entries_.clear();
    order_.clear();
  }

 private:
  void evict_past(size_t pieces) {
    while (entries_.size() > pieces) {
      entries_.erase(order_.back());
      order_.pop_back();
    }
  }

  size_t capacity_ = 0;
  std::list<uint64_t> order_;  // most recently sent first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> entries_;
};

}  // namespace headway::routers
