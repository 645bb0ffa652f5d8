#include <gtest/gtest.h>
#include <headway/core/arrival_schedule.h>
#include <headway/core/synthetic_prompt.h>
#include <headway/core/workload.h>

#include <algorithm>
#include <string>
#include <vector>

namespace headway::core {
namespace {

constexpr TokenIdRange kIds{32, 1000};

// One conversation of three turns, 5 s apart, among standalone questions at 0.5, 1 and 20 s.
Workload workload(bool waits, double time_scale = 1.0) {
  std::string text = "seed = 7\ntime_scale = " + std::to_string(time_scale) + R"(
[arrival]
process = "fixed"
times = [0, 0.5, 1, 20]
[[classes]]
name = "chat"
share = 1
prompt = { dist = "fixed", value = 40 }
output = { dist = "fixed", value = 8 }
conversation = { turns = 3, gap = 5.0, wait_for_answer = )" +
                     std::string(waits ? "true" : "false") + R"( }
[[classes]]
name = "question"
share = 1
prompt = { dist = "fixed", value = 30 }
output = { dist = "fixed", value = 4 }
)";
  return parse_workload(text, "schedule.toml");
}

// The index of the first request of class 0 with this turn.
size_t turn_index(const Workload& w, uint32_t conversation_first, uint32_t turn) {
  for (size_t i = 0; i < w.requests.size(); ++i) {
    if (w.requests[i].class_index == 0 && w.requests[i].turn == turn &&
        w.requests[i].conversation_id() == conversation_first) {
      return i;
    }
  }
  ADD_FAILURE() << "no turn " << turn;
  return 0;
}

// The index of the first turn of the first conversation (which request begins it depends on the
// class drawn for each time).
size_t first_conversation(const Workload& w) {
  for (size_t i = 0; i < w.requests.size(); ++i) {
    if (w.requests[i].class_index == 0 && w.requests[i].turn == 0) return i;
  }
  ADD_FAILURE() << "no conversation";
  return 0;
}

std::vector<size_t> take_all_due(ArrivalSchedule& schedule) {
  std::vector<size_t> taken;
  for (auto due = schedule.next(); due; due = schedule.next()) {
    taken.push_back(due->index);
    schedule.take();
  }
  return taken;
}

TEST(ArrivalSchedule, AnOpenLoopWorkloadGoesInOrderAtItsArrivalsWithItsSyntheticPrompts) {
  const Workload w = workload(false);
  ArrivalSchedule schedule(w, kIds);
  EXPECT_FALSE(schedule.closes_loops());
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const auto due = schedule.next();
    ASSERT_TRUE(due);
    EXPECT_EQ(due->index, i);
    EXPECT_DOUBLE_EQ(due->time, w.requests[i].arrival);
    EXPECT_FALSE(schedule.taken(i));
    schedule.take();
    EXPECT_TRUE(schedule.taken(i));
    EXPECT_EQ(schedule.prompt(i), synthetic_prompt(w.seed, w.requests[i], kIds));
  }
  EXPECT_FALSE(schedule.next());
  EXPECT_TRUE(schedule.exhausted());
}

TEST(ArrivalSchedule, ALaterTurnGoesItsGapAfterTheTurnBeforeEndedWithThatAnswer) {
  const Workload w = workload(true);
  ArrivalSchedule schedule(w, kIds);
  ASSERT_TRUE(schedule.closes_loops());
  const size_t first = first_conversation(w);
  const auto conversation = static_cast<uint32_t>(w.requests[first].id);
  const size_t second = turn_index(w, conversation, 1);
  const size_t third = turn_index(w, conversation, 2);

  // Only the requests that go at their arrivals are due; the later turns wait.
  std::vector<size_t> due_now = take_all_due(schedule);
  EXPECT_EQ(std::count(due_now.begin(), due_now.end(), second), 0);
  EXPECT_EQ(std::count(due_now.begin(), due_now.end(), third), 0);
  EXPECT_EQ(std::count(due_now.begin(), due_now.end(), first), 1);
  EXPECT_FALSE(schedule.exhausted());
  EXPECT_FALSE(schedule.taken(second));
  ASSERT_TRUE(schedule.index_of(w.requests[first].id));
  EXPECT_EQ(*schedule.index_of(w.requests[first].id), first);

  const std::vector<int32_t> first_prompt = schedule.prompt(first);
  EXPECT_EQ(first_prompt, synthetic_prompt(w.seed, w.requests[first], kIds));
  // The answer, as an engine wrote it: ids no synthetic stream has.
  const std::vector<int32_t> answer = {5, 6, 7, 8, 9, 10, 11, 12};
  schedule.ended(first, 3.25, true, answer);
  auto due = schedule.next();
  ASSERT_TRUE(due);
  EXPECT_EQ(due->index, second);
  EXPECT_DOUBLE_EQ(due->time, 3.25 + 5.0);
  schedule.take();
  EXPECT_TRUE(schedule.taken(second));
  const std::vector<int32_t> second_prompt = schedule.prompt(second);
  // The previous prompt, its answer, then the turn's own message: the end of its nominal prompt.
  const std::vector<int32_t> nominal = synthetic_prompt(w.seed, w.requests[second], kIds);
  ASSERT_EQ(second_prompt.size(), nominal.size());
  EXPECT_TRUE(std::equal(first_prompt.begin(), first_prompt.end(), second_prompt.begin()));
  EXPECT_TRUE(std::equal(answer.begin(), answer.end(), second_prompt.begin() + 40));
  EXPECT_TRUE(std::equal(nominal.begin() + 48, nominal.end(), second_prompt.begin() + 48));

  // A server that did not say which ids it produced: the nominal answer's stand in, so the next
  // prompt begins with this one and then the open loop's ids.
  EXPECT_EQ(schedule.stand_in_answers(), 0u);
  schedule.ended(second, 10.0, true, {});
  EXPECT_EQ(schedule.stand_in_answers(), 1u);
  due = schedule.next();
  ASSERT_TRUE(due);
  EXPECT_EQ(due->index, third);
  EXPECT_DOUBLE_EQ(due->time, 15.0);
  schedule.take();
  const std::vector<int32_t> third_prompt = schedule.prompt(third);
  const std::vector<int32_t> third_nominal = synthetic_prompt(w.seed, w.requests[third], kIds);
  ASSERT_EQ(third_prompt.size(), third_nominal.size());
  EXPECT_TRUE(std::equal(second_prompt.begin(), second_prompt.end(), third_prompt.begin()));
  EXPECT_TRUE(
      std::equal(third_nominal.begin() + 88, third_nominal.end(), third_prompt.begin() + 88));
  schedule.ended(third, 16.0, true, {});  // the last turn: nothing follows
  take_all_due(schedule);
  EXPECT_TRUE(schedule.exhausted());
  EXPECT_EQ(schedule.dropped(), 0u);
}

TEST(ArrivalSchedule, ATurnWithoutAnAnswerEndsItsConversation) {
  const Workload w = workload(true);
  ArrivalSchedule schedule(w, kIds);
  const size_t first = first_conversation(w);
  take_all_due(schedule);
  schedule.prompt(first);
  schedule.ended(first, 2.0, false, {});
  EXPECT_EQ(schedule.dropped(), 2u);
  const auto conversation = static_cast<uint32_t>(w.requests[first].id);
  EXPECT_TRUE(schedule.was_dropped(turn_index(w, conversation, 1)));
  EXPECT_TRUE(schedule.was_dropped(turn_index(w, conversation, 2)));
  EXPECT_FALSE(schedule.was_dropped(first));
  EXPECT_FALSE(schedule.taken(turn_index(w, conversation, 1)));
  EXPECT_FALSE(schedule.next());
  EXPECT_TRUE(schedule.exhausted());
  // A second end of the same request changes nothing.
  schedule.ended(first, 3.0, false, {});
  EXPECT_EQ(schedule.dropped(), 2u);
}

TEST(ArrivalSchedule, TheThinkTimeIsScaledAsTheArrivalsAre) {
  const Workload w = workload(true, 2.0);
  ArrivalSchedule schedule(w, kIds);
  const size_t first = first_conversation(w);
  take_all_due(schedule);
  schedule.prompt(first);
  schedule.ended(first, 4.0, true, std::vector<int32_t>(8, 3));
  const auto due = schedule.next();
  ASSERT_TRUE(due);
  EXPECT_DOUBLE_EQ(due->time, 4.0 + 10.0);
}

// A turn released by an answer takes its place among the requests that go at their arrivals, by
// time (ties in workload order); a shared beginning and a max_tokens cut shape the next prompt as
// the answer that actually came does, however long it is.
TEST(ArrivalSchedule, AReleasedTurnGoesAmongTheFixedArrivalsByItsTime) {
  const Workload w = parse_workload(R"(
seed = 1
[arrival]
process = "fixed"
times = [0, 2, 4, 6]
[[classes]]
name = "chat"
share = 1
max_tokens = 5
shared_prefix = { tokens = 16, count = 1 }
prompt = { dist = "fixed", value = 20 }
output = { dist = "fixed", value = 9 }
conversation = { turns = 2, gap = 1.0, wait_for_answer = true }
)",
                                    "mixed.toml");
  // Four conversations of two turns: firsts at 0, 2, 4, 6, their turns released by answers.
  ASSERT_EQ(w.requests.size(), 8u);
  ArrivalSchedule schedule(w, kIds);
  auto due = schedule.next();
  ASSERT_TRUE(due);
  const size_t a = due->index;
  schedule.take();
  const std::vector<int32_t> a_prompt = schedule.prompt(a);
  EXPECT_EQ(a_prompt.size(), 36u);  // 16 shared + 20 of its own
  // Its answer (3 tokens: shorter than the 5 asked for) ends at 0.5: its turn is due at 1.5,
  // before the next first turn at 2.
  schedule.ended(a, 0.5, true, std::vector<int32_t>{7, 7, 7});
  due = schedule.next();
  ASSERT_TRUE(due);
  EXPECT_DOUBLE_EQ(due->time, 1.5);
  EXPECT_EQ(w.requests[due->index].turn, 1u);
  const size_t a_turn = due->index;
  schedule.take();
  const std::vector<int32_t> a_turn_prompt = schedule.prompt(a_turn);
  // The prompt as sent, the 3 ids that came, then the turn's 20 new ones (after the nominal
  // prompt of 36 and the nominal answer cut to max_tokens, 5).
  ASSERT_EQ(a_turn_prompt.size(), 36u + 3u + 20u);
  EXPECT_TRUE(std::equal(a_prompt.begin(), a_prompt.end(), a_turn_prompt.begin()));
  const std::vector<int32_t> nominal = synthetic_prompt(w.seed, w.requests[a_turn], kIds);
  ASSERT_EQ(nominal.size(), 36u + 5u + 20u);
  EXPECT_TRUE(std::equal(nominal.end() - 20, nominal.end(), a_turn_prompt.end() - 20));
  // The next first turn; then the second conversation's turn, released at exactly the time of
  // the third first turn, goes before it: workload order breaks the tie, and the turn's nominal
  // time (3 s) puts it earlier in the workload than the first turn at 4 s.
  due = schedule.next();
  ASSERT_TRUE(due);
  EXPECT_DOUBLE_EQ(due->time, 2.0);
  const size_t b = due->index;
  schedule.take();
  schedule.prompt(b);
  schedule.ended(b, 3.0, true, std::vector<int32_t>{8});
  due = schedule.next();
  ASSERT_TRUE(due);
  EXPECT_DOUBLE_EQ(due->time, 4.0);
  EXPECT_EQ(w.requests[due->index].turn, 1u);
  EXPECT_EQ(w.requests[due->index].conversation_id(), w.requests[b].id);
  schedule.take();
  due = schedule.next();
  ASSERT_TRUE(due);
  EXPECT_DOUBLE_EQ(due->time, 4.0);
  EXPECT_EQ(w.requests[due->index].turn, 0u);
}

}  // namespace
}  // namespace headway::core
