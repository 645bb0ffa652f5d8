// What each engine's prefix cache is believed to hold, for a router that places a request where
// the beginning of its prompt is cached (ABI 1.8's hw_route_prefix; the prefix_aware, length and
// disaggregated routers use it). Header-only; plugin side.
//
// A belief, made exact by the engines' KV events where the host sends them (ABI 1.9, apply()):
// a router records where it sends a prompt (the engine will hold it once computed), and the
// events add what the engines store otherwise (a conversation's answer, KV moved in) and take
// away what they evict. Without events a router sees no eviction. A wrong belief costs a request
// placed where its beginning is computed again, the cost of any router that does not track
// prefixes. (The disaggregated router's local_prefill_where_cached also acts on it to prefill a
// prompt on a decode engine, which a wrong belief makes compute the whole prompt there: hence
// that option is off by default.)
//
// Ownership: each object owns its entries. Threading: one router instance's; not synchronised.
#pragma once

#include <headway/abi.h>

#include <cstddef>
#include <cstdint>
#include <headway/sdk/options.hpp>
#include <headway/sdk/router.hpp>
#include <iterator>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace headway::sdk {

// One engine's: the prompt beginnings (hashes of hw_route_prefix) of the requests sent there and
// of those its cache reports holding, the most recent kept, up to a capacity in pieces. A piece
// sent there is *pending* until the engine reports holding it (it computed it, or a request took it
// from its cache): an eviction reported meanwhile does not take it away, since the request sent
// there will compute it again.
class PrefixTracker {
 public:
  PrefixTracker() = default;
  // Not copyable: the map points into the list, and a copy's would point into the original's.
  // Moving keeps the list's nodes, and so the map's iterators.
  PrefixTracker(const PrefixTracker&) = delete;
  PrefixTracker& operator=(const PrefixTracker&) = delete;
  PrefixTracker(PrefixTracker&&) noexcept = default;
  PrefixTracker& operator=(PrefixTracker&&) noexcept = default;

  // How many of `hashes`, from the first, it holds: the pieces of the prompt's beginning the
  // engine is believed to hold, up to the first it does not.
  size_t matched(std::span<const uint64_t> hashes) const {
    size_t n = 0;
    while (n < hashes.size() && entries_.count(hashes[n]) != 0) ++n;
    return n;
  }

  // Records that a prompt beginning so was sent to the engine (pending: true) or that the engine
  // reports holding it (false): each piece becomes the most recently used, the first most of all,
  // so that the pieces evicted first (past the capacity) are the deepest ones. The engine's cache
  // also evicts a request's last blocks first, keeping beginnings that others share.
  // Once full, a new piece takes the least recent one's nodes: no allocation in steady state.
  void record(std::span<const uint64_t> hashes, bool pending = true) {
    if (capacity_ == 0) return;  // holds nothing (its engine's KV size is not known yet)
    // Past the capacity only the first pieces can be kept: the deeper ones would go at once.
    if (hashes.size() > capacity_) hashes = hashes.first(capacity_);
    for (size_t i = hashes.size(); i-- > 0;) {
      const auto held = entries_.find(hashes[i]);
      if (held != entries_.end()) {
        order_.splice(order_.begin(), order_, held->second.place);
        held->second.pending = pending;
        continue;
      }
      if (entries_.size() < capacity_) {
        order_.push_front(hashes[i]);
        entries_.emplace(hashes[i], Entry{order_.begin(), pending});
        continue;
      }
      // Full: the least recent piece's list node moves to the front and its map node is re-keyed.
      auto node = entries_.extract(order_.back());
      order_.splice(order_.begin(), order_, std::prev(order_.end()));
      order_.front() = hashes[i];
      node.key() = hashes[i];
      node.mapped() = Entry{order_.begin(), pending};
      entries_.insert(std::move(node));
    }
  }

  // The engine evicted the piece (a KV event): it and the pieces after it are no longer matched,
  // unless a request sent there since it last reported holding the piece will compute it again.
  void remove(uint64_t hash) {
    const auto held = entries_.find(hash);
    if (held == entries_.end() || held->second.pending) return;
    order_.erase(held->second.place);
    entries_.erase(held);
  }
  // Whether the piece is held and pending (sent there, not yet reported held).
  bool pending(uint64_t hash) const {
    const auto held = entries_.find(hash);
    return held != entries_.end() && held->second.pending;
  }

  // The most pieces held; the least recently sent go first when it shrinks.
  void set_capacity(size_t pieces) {
    capacity_ = pieces;
    evict_past(capacity_);
  }
  size_t capacity() const { return capacity_; }
  size_t size() const { return entries_.size(); }

  // Forgets everything (the engine went down: its cache is gone when it comes back). Free when
  // empty: a down engine is seen on every route, and clearing a map touches all its buckets.
  void clear() {
    if (entries_.empty()) return;
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

  struct Entry {
    std::list<uint64_t>::iterator place;  // in order_
    bool pending;
  };
  size_t capacity_ = 0;
  std::list<uint64_t> order_;  // most recently sent first
  std::unordered_map<uint64_t, Entry> entries_;
};

// Every engine's tracker, and how much of the request being placed each holds. A router calls
// observe() with the request's prefix and the engines' loads, subtracts credit() (or reads
// matched_tokens()) in its choice, and record()s the engine that will compute the prompt (not one
// that refuses it). With a weight of 0 it tracks nothing and every credit is 0.
class PrefixAffinity {
 public:
  // tracked_tokens: tokens of beginnings remembered per engine; 0 = the engine's KV cache size
  // (kv_blocks_total x block_size), which bounds what it can hold. weight: what one cached token
  // is worth in the router's load measure (credit()).
  // reads_events: apply() corrects the beliefs (false: it ignores the events).
  explicit PrefixAffinity(uint64_t tracked_tokens = 0, double weight = 1.0,
                          bool reads_events = true)
      : tracked_tokens_(tracked_tokens), weight_(weight), reads_events_(reads_events) {}
  // From a router's cached_token_weight_option(), tracked_tokens_option() and kv_events_option().
  static PrefixAffinity from_options(const Options& options) {
    return PrefixAffinity(static_cast<uint64_t>(options.get_int("tracked_tokens")),
                          options.get_double("cached_token_weight"), options.get_bool("kv_events"));
  }

  // Forgets the engines seen down, bounds each tracker by its engine's KV size as its load now
  // says (an engine process says it once it answers, and again after a restart with another
  // configuration), and finds how many tokens of `prefix` each engine holds.
  void observe(const RoutePrefix& prefix, std::span<const hw_engine_load> engines) {
    if (weight_ == 0) return;
    // One tracker per engine of the deployment; the host passes every engine, in order, and never
    // more than at create (a cheap guard all the same).
    if (trackers_.size() < engines.size()) trackers_.resize(engines.size());
    matched_tokens_.assign(trackers_.size(), 0.0);  // same size after the first: no allocation
    for (const hw_engine_load& e : engines) {
      if (e.engine_index >= trackers_.size()) continue;
      PrefixTracker& tracker = trackers_[e.engine_index];
      if (!e.alive) {
        tracker.clear();
        if (e.engine_index < early_.size()) early_[e.engine_index].clear();
        continue;
      }
      update_capacity(tracker, e, prefix.piece_tokens);
      if (e.engine_index < early_.size() && !early_[e.engine_index].empty() &&
          tracker.capacity() > 0) {
        apply_to(tracker, early_[e.engine_index]);
        std::vector<hw_kv_event>().swap(early_[e.engine_index]);  // once: give the room back
      }
      matched_tokens_[e.engine_index] =
          static_cast<double>(tracker.matched(prefix.hashes)) * prefix.piece_tokens;
    }
  }

  // Tokens of the beginning observe() was given that the engine is believed to hold.
  double matched_tokens(const hw_engine_load& e) const {
    return e.engine_index < matched_tokens_.size() ? matched_tokens_[e.engine_index] : 0.0;
  }
  // What they are worth against the router's load: weight x matched_tokens().
  double credit(const hw_engine_load& e) const { return weight_ * matched_tokens(e); }

  // The engine will compute the prompt: it holds the beginning from now on.
  void record(uint32_t engine_index, const RoutePrefix& prefix) {
    if (weight_ != 0 && engine_index < trackers_.size()) {
      trackers_[engine_index].record(prefix.hashes);
    }
  }

  // What engine `engine_index`'s cache stored and evicted (Router::on_kv_events): a stored piece
  // becomes held (no longer pending), a removed one is forgotten unless pending
  // (PrefixTracker::remove), and ALL_REMOVED forgets the engine's. Events that come before the
  // engine's KV size is known (an engine process's history, told before the router's first
  // observe() of it) are kept, up to kEarlyEvents, and applied once observe() knows it.
  void apply(uint32_t engine_index, std::span<const hw_kv_event> events) {
    if (weight_ == 0 || !reads_events_) return;
    if (trackers_.size() <= engine_index) trackers_.resize(size_t{engine_index} + 1);
    if (reporting_.size() <= engine_index) reporting_.resize(size_t{engine_index} + 1, 0);
    if (early_.size() <= engine_index) early_.resize(size_t{engine_index} + 1);
    reporting_[engine_index] = 1;
    PrefixTracker& tracker = trackers_[engine_index];
    if (tracker.capacity() == 0) {
      std::vector<hw_kv_event>& early = early_[engine_index];
      // Past the bound the oldest go: what they said is then not believed, which costs at most a
      // beginning computed again.
      if (early.size() + events.size() > kEarlyEvents) early.clear();
      if (events.size() <= kEarlyEvents) early.insert(early.end(), events.begin(), events.end());
      return;
    }
    apply_to(tracker, events);
  }
  static constexpr size_t kEarlyEvents = size_t{1} << 17;

  // Whether the engine reports what its cache stores (the host announced it, and events are
  // read): its beliefs are corrected by them, and what it stores it will say.
  bool reports(uint32_t engine_index) const {
    return engine_index < reporting_.size() && reporting_[engine_index] != 0;
  }

  const PrefixTracker& tracker(uint32_t engine_index) const { return trackers_.at(engine_index); }

 private:
  // Consecutive stored pieces are recorded together, in the order the cache stored them (a
  // prompt's, first to last), so that, as for a routed prompt, a prompt's first pieces are the
  // most recent and its deepest go first when the tracker is full. A run longer than the tracker
  // keeps its last pieces, the most recently stored.
  void apply_to(PrefixTracker& tracker, std::span<const hw_kv_event> events) {
    for (size_t i = 0; i < events.size();) {
      switch (events[i].kind) {
        case HW_KV_EVENT_STORED: {
          stored_run_.clear();
          for (; i < events.size() && events[i].kind == HW_KV_EVENT_STORED; ++i) {
            stored_run_.push_back(events[i].piece_hash);
          }
          std::span<const uint64_t> run(stored_run_);
          if (run.size() > tracker.capacity()) run = run.last(tracker.capacity());
          tracker.record(run, /*pending=*/false);
          continue;
        }
        case HW_KV_EVENT_REMOVED:
          tracker.remove(events[i].piece_hash);
          break;
        case HW_KV_EVENT_ALL_REMOVED:
          tracker.clear();
          break;
        default:
          break;  // a kind of a later ABI: not this router's to read
      }
      ++i;
    }
  }

  void update_capacity(PrefixTracker& tracker, const hw_engine_load& e, uint32_t piece_tokens) {
    if (piece_tokens == 0) return;
    const uint64_t tokens =
        tracked_tokens_ > 0 ? tracked_tokens_ : uint64_t{e.kv_blocks_total} * e.block_size;
    // Not known yet (an engine process that has not answered): keep what it was, at first
    // nothing, so that such an engine is chosen as if no beginning were tracked.
    if (tokens == 0) return;
    const uint64_t pieces = tokens / piece_tokens;
    if (pieces != tracker.capacity()) tracker.set_capacity(pieces);
  }

  uint64_t tracked_tokens_;
  double weight_;
  bool reads_events_;
  std::vector<PrefixTracker> trackers_;          // per engine
  std::vector<double> matched_tokens_;           // per engine, the request being placed; scratch
  std::vector<char> reporting_;                  // per engine: apply() was called for it
  std::vector<std::vector<hw_kv_event>> early_;  // per engine: events before its KV size was known
  std::vector<uint64_t> stored_run_;             // apply_to()'s scratch
};

// The weight of a cached token against the router's load measure, whose meaning `doc` states. 2 by
// default, not 1: a request sent to an engine with the same beginning, still queued or prefilling
// there, counts its whole prompt in the engine's load, though the beginning is computed once for
// both; at 1 each such request pushes the next one with that beginning to another engine, which a
// burst spreads over all of them (docs/performance.md, "Routing by prompt beginnings").
constexpr hw_option_spec cached_token_weight_option(const char* doc) {
  return double_option("cached_token_weight", 2.0, 0.0, 1000.0, doc);
}

// The option that bounds the trackers, the same for every router that uses them.
constexpr hw_option_spec tracked_tokens_option() {
  return int_option("tracked_tokens", 0, 0, int64_t{1} << 40,
                    "Tokens of prompt beginnings remembered per engine, the most recently routed "
                    "kept; 0 = the engine's KV cache size (kv_blocks x block_size), which bounds "
                    "what it can hold.");
}

// Whether the engines' KV events correct what the router believes they hold, the same for every
// router that uses PrefixAffinity.
constexpr hw_option_spec kv_events_option() {
  return bool_option("kv_events", true,
                     "Whether what the engines' prefix caches report storing and evicting corrects "
                     "what this router believes they hold (ABI 1.9 KV events). false: beliefs "
                     "come only from where requests were sent, and never see an eviction.");
}

}  // namespace headway::sdk
