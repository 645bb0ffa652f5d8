#include <fmt/format.h>
#include <headway/core/arrival_schedule.h>
#include <headway/core/error.h>

#include <algorithm>
#include <utility>

namespace headway::core {

ArrivalSchedule::ArrivalSchedule(const Workload& workload, TokenIdRange range)
    : workload_(workload), range_(range) {
  const bool any = std::any_of(workload.classes.begin(), workload.classes.end(),
                               [](const RequestClass& c) { return c.waits_for_answers; });
  if (!any) return;
  const size_t n = workload.requests.size();
  successor_.assign(n, kNone);
  predecessor_.assign(n, kNone);
  taken_.assign(n, 0);
  // Each waiting conversation's latest turn so far, by conversation id. Turns come in arrival
  // order, and a conversation's nominal arrivals grow with its turns.
  std::unordered_map<uint64_t, size_t> latest;
  for (size_t i = 0; i < n; ++i) {
    const WorkloadRequest& r = workload.requests[i];
    if (r.class_index >= workload.classes.size() ||
        !workload.classes[r.class_index].waits_for_answers) {
      continue;
    }
    const auto [it, first] = latest.try_emplace(r.conversation_id(), i);
    if (first) continue;
    const size_t before = it->second;
    it->second = i;
    // A slice of the workload that lost the turn before sends this one at its arrival.
    if (r.turn == 0 || workload.requests[before].turn + 1 != r.turn) continue;
    successor_[before] = static_cast<uint32_t>(i);
    predecessor_[i] = static_cast<uint32_t>(before);
    ++held_left_;
    index_of_id_.emplace(workload.requests[before].id, before);
  }
  skip_held();
}

void ArrivalSchedule::skip_held() {
  while (cursor_ < workload_.requests.size() && !predecessor_.empty() &&
         predecessor_[cursor_] != kNone) {
    ++cursor_;
  }
}

std::optional<ArrivalSchedule::Due> ArrivalSchedule::next() const {
  std::optional<Due> due;
  if (cursor_ < workload_.requests.size()) {
    due = Due{cursor_, workload_.requests[cursor_].arrival};
  }
  if (!released_.empty()) {
    const Later& later = released_.top();
    if (!due || later.time < due->time || (later.time == due->time && later.index < due->index)) {
      due = Due{later.index, later.time};
    }
  }
  return due;
}

void ArrivalSchedule::take() {
  const std::optional<Due> due = next();
  if (!due) throw Error("ArrivalSchedule::take: nothing is due", HW_INTERNAL);
  if (!released_.empty() && released_.top().index == due->index) {
    released_.pop();
  } else {
    ++cursor_;
    skip_held();
  }
  if (!taken_.empty()) taken_[due->index] = kTaken;
}

bool ArrivalSchedule::exhausted() const {
  return cursor_ >= workload_.requests.size() && released_.empty() && held_left_ == 0;
}

bool ArrivalSchedule::taken(size_t index) const {
  if (taken_.empty()) return index < cursor_;
  return index < taken_.size() && taken_[index] == kTaken;
}

bool ArrivalSchedule::was_dropped(size_t index) const {
  return index < taken_.size() && taken_[index] == kDropped;
}

std::optional<size_t> ArrivalSchedule::index_of(uint64_t id) const {
  const auto it = index_of_id_.find(id);
  if (it == index_of_id_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> ArrivalSchedule::synthetic(size_t index, uint32_t from, uint32_t to) const {
  return synthetic_prompt_ids(workload_.seed, workload_.requests[index], range_, from, to);
}

std::vector<int32_t> ArrivalSchedule::prompt(size_t index) {
  if (successor_.empty()) return synthetic(index, 0, UINT32_MAX);
  std::vector<int32_t> ids;
  if (predecessor_[index] != kNone) {
    const auto it = histories_.find(index);
    if (it == histories_.end()) {
      throw Error(fmt::format("ArrivalSchedule: request {}'s turn before it has not ended",
                              workload_.requests[index].id),
                  HW_INTERNAL);
    }
    ids = std::move(it->second);
    histories_.erase(it);
    // Its own message: the end of its nominal prompt, past the previous turn's nominal prompt
    // and answer (generated alone: no need for the ids before it).
    const WorkloadRequest& previous = workload_.requests[predecessor_[index]];
    const uint64_t message_from = uint64_t{previous.prompt_tokens} + previous.output_tokens;
    const std::vector<int32_t> message = synthetic(
        index, static_cast<uint32_t>(std::min<uint64_t>(message_from, UINT32_MAX)), UINT32_MAX);
    ids.insert(ids.end(), message.begin(), message.end());
  } else {
    ids = synthetic(index, 0, UINT32_MAX);
  }
  // The next turn begins with this prompt; its answer joins it when this turn ends.
  if (successor_[index] != kNone) histories_[successor_[index]] = ids;
  return ids;
}

void ArrivalSchedule::cut(size_t index) {
  if (successor_.empty() || index >= successor_.size()) return;
  for (uint32_t turn = std::exchange(successor_[index], kNone); turn != kNone;) {
    histories_.erase(turn);
    --held_left_;
    turn = std::exchange(successor_[turn], kNone);
  }
}

void ArrivalSchedule::ended(size_t index, double time, bool answered,
                            std::span<const int32_t> answer) {
  if (successor_.empty() || index >= successor_.size()) return;
  const uint32_t next = successor_[index];
  if (next == kNone) return;
  successor_[index] = kNone;  // a request ends once
  if (!answered) {
    // The rest of the conversation goes unsent.
    for (uint32_t turn = next; turn != kNone;) {
      histories_.erase(turn);
      taken_[turn] = kDropped;
      ++dropped_;
      --held_left_;
      const uint32_t after = successor_[turn];
      successor_[turn] = kNone;
      turn = after;
    }
    return;
  }
  const auto it = histories_.find(next);
  if (it == histories_.end()) {
    throw Error(fmt::format("ArrivalSchedule: request {} ended before its prompt was built",
                            workload_.requests[index].id),
                HW_INTERNAL);
  }
  std::vector<int32_t>& history = it->second;
  if (!answer.empty()) {
    history.insert(history.end(), answer.begin(), answer.end());
  } else {
    // The server did not say which ids it produced: those of the nominal answer stand in.
    const WorkloadRequest& self = workload_.requests[index];
    const std::vector<int32_t> stand_in =
        synthetic(next, self.prompt_tokens, self.prompt_tokens + self.output_tokens);
    history.insert(history.end(), stand_in.begin(), stand_in.end());
    ++stand_in_answers_;
  }
  const double think = workload_.requests[next].arrival - workload_.requests[index].arrival;
  released_.push(Later{time + std::max(think, 0.0), next});
  --held_left_;
}

}  // namespace headway::core
