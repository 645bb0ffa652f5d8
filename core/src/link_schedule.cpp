#include <headway/core/link_schedule.h>

#include <algorithm>

namespace headway::core {

double LinkSchedule::end_of_overlap(double t, double duration) const {
  for (const Interval& busy : busy_) {
    if (busy.start >= t + duration) break;  // sorted: none later overlaps
    if (busy.end > t) return busy.end;
  }
  return t;
}

double LinkSchedule::first_common_gap(const LinkSchedule& a, const LinkSchedule& b, double ready,
                                      double duration) {
  if (duration <= 0.0) return ready;
  // Each move goes to the end of a booked interval, so this ends after at most as many moves as
  // there are intervals.
  double t = ready;
  while (true) {
    const double after_a = a.end_of_overlap(t, duration);
    const double after_b = b.end_of_overlap(after_a, duration);
    if (after_b == t) return t;
    t = after_b;
  }
}

void LinkSchedule::book(double start, double end) {
  if (end <= start) return;
  auto at = std::lower_bound(busy_.begin(), busy_.end(), start,
                             [](const Interval& i, double s) { return i.start < s; });
  // Merge with the neighbours it touches, so back-to-back transfers keep one interval.
  if (at != busy_.begin() && std::prev(at)->end == start) {
    auto before = std::prev(at);
    before->end = end;
    if (at != busy_.end() && at->start == end) {
      before->end = at->end;
      busy_.erase(at);
    }
    return;
  }
  if (at != busy_.end() && at->start == end) {
    at->start = start;
    return;
  }
  busy_.insert(at, Interval{start, end});
}

void LinkSchedule::forget_before(double t) {
  // Intervals are disjoint and sorted by start, so by end too.
  auto keep =
      std::find_if(busy_.begin(), busy_.end(), [t](const Interval& i) { return i.end > t; });
  busy_.erase(busy_.begin(), keep);
}

}  // namespace headway::core
