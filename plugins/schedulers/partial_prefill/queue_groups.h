// Ordering a queue by priority in linear time, for the partial_prefill scheduler's priority policy.
//
// The policy serves requests by (group, arrival, tie), where the group is the priority (and, for
// running requests, whether they are prefilling). A comparison sort of 1,000 running requests and
// a partial sort of 10,000 waiting ones cost 73-114 us per step (docs/performance.md). In
// practice a queue holds a handful of distinct priorities, and the members of one group already
// stand in arrival order in the queue (the engine appends arrivals; a preempted request goes to
// the front and arrived earlier than those behind it). Then the order is a stable counting sort by
// group and nothing needs comparing. QueueGroups records, in one pass, the distinct groups, how
// many members each has, where the first stands and whether each one's members are in (arrival,
// tie) order; the caller sorts only the groups that are not, and falls back to a comparison sort
// of the whole queue when it has more than kSlots distinct groups.
//
// Not thread-safe; the scheduler keeps one instance per queue. No allocation: everything is in
// fixed arrays.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace headway::scheduler {

class QueueGroups {
 public:
  static constexpr uint32_t kSlots = 64;

  // The key of a group: lower priority values first and, when `after` is set, after every group
  // without it (the running queue's prefills, served after its decodes).
  static constexpr int64_t priority_key(int32_t priority, bool after = false) {
    const uint32_t biased = static_cast<uint32_t>(priority) ^ 0x80000000u;  // order-preserving
    return (static_cast<int64_t>(after) << 32) | biased;
  }

  // What record() needs to know of one member of the queue.
  struct Member {
    int64_t key;     // its group, from priority_key()
    double arrival;  // then earlier arrivals
    uint64_t tie;    // then lower ties (0 when queue position is the tie-break)
  };

  struct Group {
    int64_t key = 0;
    uint32_t count = 0;  // members
    uint32_t first = 0;  // queue position of its first member
    // Its first position in the sorted queue. The caller may advance it as a cursor while it
    // scatters the members; it then ends at the group's end.
    uint32_t start = 0;
    bool in_order = true;  // its members, in queue order, are in (arrival, tie) order
  };

  // Records the queue's members 0..n-1 (member_of(i) gives a Member), then orders the groups by
  // key and gives each its start in the sorted queue; on_slot(i, slot) is told each member's slot
  // (its group is group(slot)). False when the queue has more than kSlots distinct keys: nothing
  // here is usable then.
  template <class MemberOf, class OnSlot>
  bool record(uint32_t n, MemberOf&& member_of, OnSlot&& on_slot) {
    uint64_t used = 0;
    uint64_t unordered = 0;
    // Most queues' priorities have distinct home slots: the first pass assumes so and stops at
    // the first key whose slot another key holds; the second probes for a free slot. A pass that
    // could probe was 20-40% slower, even where it never did (a micro-benchmark of record() alone
    // on 10,000 views, not kept in the tree).
    if (pass<false>(n, member_of, on_slot, used, unordered) != Pass::kDone &&
        pass<true>(n, member_of, on_slot, used, unordered) != Pass::kDone) {
      return false;
    }
    size_ = 0;
    for (uint64_t rest = used; rest != 0; rest &= rest - 1) {
      const auto slot = static_cast<uint8_t>(std::countr_zero(rest));
      groups_[slot] =
          Group{key_[slot], count_[slot], first_[slot], 0, (unordered >> slot & 1) == 0};
      by_key_[size_++] = slot;
    }
    std::sort(by_key_.begin(), by_key_.begin() + size_,
              [&](uint8_t a, uint8_t b) { return key_[a] < key_[b]; });
    uint32_t start = 0;
    for (size_t rank = 0; rank < size_; ++rank) {
      groups_[by_key_[rank]].start = start;
      start += groups_[by_key_[rank]].count;
    }
    all_in_order_ = unordered == 0;
    return true;
  }

  // The groups found by the last successful record().
  size_t size() const { return size_; }
  bool all_in_order() const { return all_in_order_; }
  Group& group(uint8_t slot) { return groups_[slot]; }
  // The group served rank-th (0: the lowest key).
  Group& ranked(size_t rank) { return groups_[by_key_[rank]]; }

 private:
  enum class Pass { kDone, kSlotTaken, kTooMany };

  // One pass over the queue, bound by reading it (64-byte views): the per-slot state lives in
  // parallel arrays and the flags in two bit masks (a Group struct updated in place was 15-20%
  // slower in the scheduler benchmark). Without kProbing, a key whose home slot holds another key
  // ends the pass (kSlotTaken); with it, the key takes the next free slot (linear probing), and
  // only a 65th distinct key ends it (kTooMany).
  template <bool kProbing, class MemberOf, class OnSlot>
  Pass pass(uint32_t n, MemberOf& member_of, OnSlot& on_slot, uint64_t& used, uint64_t& unordered) {
    used = 0;
    unordered = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const Member m = member_of(i);
      uint32_t slot = home_slot(m.key);
      if ((used >> slot & 1) != 0 && key_[slot] != m.key) {
        if constexpr (!kProbing) {
          return Pass::kSlotTaken;
        } else {
          slot = probe(m.key, slot, used);
          if (slot == kSlots) return Pass::kTooMany;
        }
      }
      const uint64_t bit = uint64_t{1} << slot;
      if ((used & bit) == 0) {
        used |= bit;
        key_[slot] = m.key;
        count_[slot] = 0;
        first_[slot] = i;
      } else if (m.arrival < last_arrival_[slot] ||
                 (m.arrival == last_arrival_[slot] && m.tie < last_tie_[slot])) {
        unordered |= bit;
      }
      last_arrival_[slot] = m.arrival;
      last_tie_[slot] = m.tie;
      ++count_[slot];
      on_slot(i, static_cast<uint8_t>(slot));
    }
    return Pass::kDone;
  }

  // The slot of `key` after `home`, which another key holds: the next one holding `key` or free;
  // kSlots when every slot holds another key.
  uint32_t probe(int64_t key, uint32_t home, uint64_t used) const {
    for (uint32_t step = 1; step < kSlots; ++step) {
      const uint32_t slot = (home + step) % kSlots;
      if ((used >> slot & 1) == 0 || key_[slot] == key) return slot;
    }
    return kSlots;
  }

  // Priorities -32..31 take distinct slots (0 the first, -1 the last); `after` moves a priority's
  // slot by half the table.
  static uint32_t home_slot(int64_t key) {
    const auto k = static_cast<uint64_t>(key);
    return static_cast<uint32_t>((k + ((k >> 32) << 5)) % kSlots);
  }

  // Per slot, while record() runs.
  std::array<int64_t, kSlots> key_{};
  std::array<double, kSlots> last_arrival_{};
  std::array<uint64_t, kSlots> last_tie_{};
  std::array<uint32_t, kSlots> count_{};
  std::array<uint32_t, kSlots> first_{};
  // Per slot, after it.
  std::array<Group, kSlots> groups_{};
  std::array<uint8_t, kSlots> by_key_{};
  size_t size_ = 0;
  bool all_in_order_ = true;
};

}  // namespace headway::scheduler
