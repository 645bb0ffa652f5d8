#include <gtest/gtest.h>
#include <headway/core/link_schedule.h>

namespace headway::core {
namespace {

TEST(LinkSchedule, AFreeLinkStartsATransferWhenItIsReady) {
  const LinkSchedule a;
  const LinkSchedule b;
  EXPECT_EQ(LinkSchedule::first_common_gap(a, b, 2.5, 1.0), 2.5);
}

TEST(LinkSchedule, ATransferWaitsForTheOneOnItsLink) {
  LinkSchedule out;
  const LinkSchedule in;
  out.book(1.0, 2.0);
  EXPECT_EQ(LinkSchedule::first_common_gap(out, in, 1.5, 0.25), 2.0);
  EXPECT_EQ(LinkSchedule::first_common_gap(in, out, 1.5, 0.25), 2.0);  // either side
}

// The reason for gaps rather than a queue: the simulator learns of a transfer ready at 9.9 s
// after it placed one at 10 s. The earlier one takes the room before it when it fits there.
TEST(LinkSchedule, ATransferKnownLaterButReadyEarlierTakesTheGapBefore) {
  LinkSchedule out;
  const LinkSchedule in;
  out.book(10.0, 10.5);
  EXPECT_EQ(LinkSchedule::first_common_gap(out, in, 9.9, 0.05), 9.9);
  // One that does not fit in the gap goes after.
  EXPECT_EQ(LinkSchedule::first_common_gap(out, in, 9.9, 0.2), 10.5);
}

TEST(LinkSchedule, TheGapMustBeFreeOnBothLinks) {
  LinkSchedule out;
  LinkSchedule in;
  out.book(0.0, 1.0);
  out.book(2.0, 3.0);
  in.book(1.0, 2.5);
  // Free on `out` at 1.0 but not on `in`; free on `in` from 2.5 but `out` is busy to 3.0.
  EXPECT_EQ(LinkSchedule::first_common_gap(out, in, 0.0, 0.5), 3.0);
  // A gap of 1.0 on `out` from 1.0 is too short once `in` is busy from 1.0.
  in.book(3.0, 3.2);
  EXPECT_DOUBLE_EQ(LinkSchedule::first_common_gap(out, in, 0.0, 0.5), 3.2);
}

TEST(LinkSchedule, ATransferOfNoTimeNeedsNoGap) {
  LinkSchedule out;
  out.book(0.0, 1.0);
  EXPECT_EQ(LinkSchedule::first_common_gap(out, LinkSchedule{}, 0.5, 0.0), 0.5);
}

TEST(LinkSchedule, BackToBackBookingsAreOneInterval) {
  LinkSchedule link;
  link.book(1.0, 2.0);
  link.book(3.0, 4.0);
  link.book(2.0, 3.0);  // fills the gap: the three are one
  EXPECT_EQ(link.booked_intervals(), 1u);
  link.book(0.5, 1.0);
  link.book(4.0, 4.5);
  EXPECT_EQ(link.booked_intervals(), 1u);
  EXPECT_EQ(LinkSchedule::first_common_gap(link, LinkSchedule{}, 0.0, 0.6), 4.5);
  EXPECT_EQ(LinkSchedule::first_common_gap(link, LinkSchedule{}, 0.0, 0.5), 0.0);
}

TEST(LinkSchedule, ForgetBeforeDropsOnlyWhatEndedByThen) {
  LinkSchedule link;
  link.book(0.0, 1.0);
  link.book(2.0, 3.0);
  link.book(4.0, 5.0);
  link.forget_before(2.5);  // [2, 3) is still busy at 2.5
  EXPECT_EQ(link.booked_intervals(), 2u);
  EXPECT_EQ(LinkSchedule::first_common_gap(link, LinkSchedule{}, 2.5, 0.1), 3.0);
  link.forget_before(5.0);
  EXPECT_EQ(link.booked_intervals(), 0u);
}

}  // namespace
}  // namespace headway::core
