// grown_queue(): a run whose queue grew from its beginning to its end (offered more than it
// serves) is told from one that is busy but keeps up, from hand-made arrival and admission times.
#include "headway/core/queue_growth.h"

#include <gtest/gtest.h>

#include <vector>

namespace headway::core {
namespace {

// `count` requests arriving every `gap` seconds, the i-th admitted at admitted(i).
template <class Admitted>
std::vector<RequestRecord> arrivals(size_t count, double gap, Admitted admitted) {
  std::vector<RequestRecord> records(count);
  for (size_t i = 0; i < count; ++i) {
    records[i].arrival = gap * static_cast<double>(i);
    records[i].scheduled = admitted(i);
  }
  return records;
}

TEST(QueueGrowth, ADeploymentServingHalfItsArrivalsIsOverloaded) {
  // 1,000 requests over 99.9 s, admitted one per 0.2 s: at the last arrival 500 wait (50 s of
  // arrivals), a quarter of the way in 125.
  const auto records = arrivals(1000, 0.1, [](size_t i) { return 0.2 * static_cast<double>(i); });
  const auto grown = grown_queue(records);
  ASSERT_TRUE(grown.has_value());
  EXPECT_NEAR(static_cast<double>(grown->waiting_at_end), 500.0, 2.0);
  EXPECT_NEAR(static_cast<double>(grown->waiting_at_quarter), 125.0, 2.0);
  EXPECT_NEAR(grown->end_backlog_s, 50.0, 0.3);
}

TEST(QueueGrowth, ABusyDeploymentThatKeepsUpIsNot) {
  // Every request waits 30 s, from the first to the last: a long queue that does not grow.
  EXPECT_FALSE(grown_queue(arrivals(1000, 0.1, [](size_t i) {
                 return 0.1 * static_cast<double>(i) + 30;
               })).has_value());
  // Growing, but to less than 10 s of arrivals.
  EXPECT_FALSE(grown_queue(arrivals(1000, 0.1, [](size_t i) {
                 return 0.109 * static_cast<double>(i);
               })).has_value());
}

TEST(QueueGrowth, RefusedRequestsAndShortRunsAreLeftOut) {
  auto records = arrivals(1000, 0.1, [](size_t i) { return 0.2 * static_cast<double>(i); });
  // Refused: never admitted. Left out, the rest still grew.
  for (size_t i = 0; i < records.size(); i += 2) records[i].scheduled = kNever;
  EXPECT_TRUE(grown_queue(records).has_value());
  EXPECT_FALSE(grown_queue(arrivals(kMinGrowthRequests - 1, 1.0, [](size_t i) {
                 return 100.0 * static_cast<double>(i);
               })).has_value());
}

}  // namespace
}  // namespace headway::core
