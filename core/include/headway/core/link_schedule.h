// When one engine's KV link is busy, in simulated (virtual) time.
//
// A simulated KV transfer has a modelled duration: the time its bytes take at the link's whole
// bandwidth (KvTransportInstance::poll). Two transfers on one link cannot both have it, so the
// simulator books each transfer on its source engine's outgoing link and its destination
// engine's incoming link, and starts it in the first gap both links have for it.
//
// Why gaps and not a queue: the simulator processes engines' steps in the order of their start
// times, so transfers become known out of the order of their ready times (a prefill engine's
// 150 ms step is processed before a shorter step that ends earlier on another engine). A FIFO of
// links ordered transfers by when the simulator saw them: a transfer ready at 9.9 s waited
// behind one placed at 10 s (session 75: KV wait p99 4 ms -> 140 ms on a link 0.5% busy).
// Placing each in the first gap at or after its ready time is the order of virtual time, as far
// as it can be once earlier transfers are placed (a transfer never moves one placed before it).
//
// The latency of a transfer counts as time on the link, as the transport reports one duration;
// the presets' latencies are 5 to 50 us against milliseconds of bytes.
//
// Threading: none; the simulator's thread owns it. Booked intervals are kept in a vector that
// forget_before() trims, so it allocates only when more are booked at once than ever before.
#pragma once

#include <cstddef>
#include <vector>

namespace headway::core {

class LinkSchedule {
 public:
  // The earliest time at or after `ready` at which [start, start + duration) is free on both
  // links. duration >= 0; a transfer of no time needs no gap.
  static double first_common_gap(const LinkSchedule& a, const LinkSchedule& b, double ready,
                                 double duration);

  // Marks [start, end) busy. It must not overlap what is booked (first_common_gap's answer
  // does not); touching intervals are merged.
  void book(double start, double end);

  // Drops the intervals that end at or before `t`: no later transfer starts before it (the
  // caller's promise; the simulator passes the smallest engine clock).
  void forget_before(double t);

  size_t booked_intervals() const { return busy_.size(); }

 private:
  struct Interval {
    double start;
    double end;
  };
  // The end of the first booked interval that overlaps [t, t + duration), or t when none does.
  double end_of_overlap(double t, double duration) const;

  std::vector<Interval> busy_;  // sorted by start, disjoint
};

}  // namespace headway::core
