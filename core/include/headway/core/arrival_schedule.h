// When each request of a workload is sent, and with which prompt ids: the one place that
// `headway simulate` (both clocks) and `headway bench` ask.
//
// Most requests go at their `arrival`, in the workload's order. The later turns of a conversation
// that waits for answers (RequestClass::waits_for_answers, a closed loop as in vLLM's and
// SGLang's multi-turn benchmarks) go instead when the turn before has ended, plus the think time
// between their nominal arrivals (the class's gap, scaled as the workload's arrivals were by
// time_scale or a rate scale). Such a turn's prompt is the previous turn's prompt as sent, then
// that turn's answer as the engine or server produced it, then the turn's own new message (the
// synthetic ids its nominal prompt ends with). So a prefix cache can find the answer too, as it
// would in a real chat. A turn that got no answer (refused, failed, interrupted) ends its
// conversation: the turns after it are never sent, and dropped() counts them.
//
// Times are seconds on the workload's clock (that of WorkloadRequest::arrival).
//
// Ownership: borrows the workload, which must outlive the schedule; holds the prompt of each
// conversation in flight that will be sent again. Threading: not thread-safe; a caller with
// several threads (bench's senders) serialises every call.
#pragma once

#include <headway/core/synthetic_prompt.h>
#include <headway/core/workload.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <span>
#include <unordered_map>
#include <vector>

namespace headway::core {

class ArrivalSchedule {
 public:
  struct Due {
    size_t index;  // into workload.requests
    double time;
  };

  // `range`: the ids of the synthetic prompts (synthetic_prompt.h).
  ArrivalSchedule(const Workload& workload, TokenIdRange range);

  // Whether some turn waits for the one before to end (then ended() must be told of every request
  // taken, and prompts come from prompt()).
  bool closes_loops() const { return !successor_.empty(); }

  // The earliest request not yet taken whose time is known, or nullopt: none is, until a turn
  // ends (or every request has been taken or dropped: exhausted()). Ties go in workload order.
  std::optional<Due> next() const;
  // Takes next(), which must have a value.
  void take();
  // Whether nothing is left to take, now or later.
  bool exhausted() const;

  // The prompt of request `index`, taken and not yet sent; call once per request. A waiting
  // conversation's turn gets the ids described above, any other request its synthetic prompt.
  std::vector<int32_t> prompt(size_t index);

  // Request `index` (taken) ended at `time`. `answered`: it produced its answer, whose ids are
  // `answer` (empty when a server did not say: the synthetic ids of its nominal answer stand in).
  // Releases the conversation's next turn, or drops the rest of it when not answered. Requests
  // outside waiting conversations are ignored.
  void ended(size_t index, double time, bool answered, std::span<const int32_t> answer);
  // Request `index` (taken) was cut by the run's stop: its conversation ends there, and its later
  // turns are neither sent nor dropped() (nothing failed; the run ended first).
  void cut(size_t index);

  // The request index of workload request `id` when it is a waiting conversation's turn with a
  // turn after it (the ones whose end matters), else nullopt.
  std::optional<size_t> index_of(uint64_t id) const;

  // Turns never to be sent because an earlier turn of their conversation got no answer.
  size_t dropped() const { return dropped_; }
  // Whether request `index` was taken (false for turns not yet released or dropped).
  bool taken(size_t index) const;
  // Whether request `index` is one of the dropped() turns.
  bool was_dropped(size_t index) const;
  // Answers that ended without their ids (a server that ignores return_token_ids), whose
  // conversations went on with the nominal answer's synthetic ids instead.
  size_t stand_in_answers() const { return stand_in_answers_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Later {
    double time;
    size_t index;
    bool operator>(const Later& o) const {
      return time != o.time ? time > o.time : index > o.index;
    }
  };

  // Moves the in-order cursor past the turns that wait for an answer.
  void skip_held();
  // Positions [from, to) of the synthetic ids of request `index`'s nominal prompt.
  std::vector<int32_t> synthetic(size_t index, uint32_t from, uint32_t to) const;
  static constexpr uint8_t kTaken = 1, kDropped = 2;

  const Workload& workload_;
  TokenIdRange range_;
  size_t cursor_ = 0;  // next request in workload order that goes at its arrival
  // Only when some class waits for answers (empty otherwise: a plain workload pays nothing).
  std::vector<uint32_t> successor_;    // the conversation's next turn; kNone for none
  std::vector<uint32_t> predecessor_;  // the turn it waits for; kNone: goes at its arrival
  std::vector<uint8_t> taken_;         // 0, kTaken or kDropped
  std::unordered_map<uint64_t, size_t> index_of_id_;  // requests with a held successor
  std::priority_queue<Later, std::vector<Later>, std::greater<>> released_;
  size_t held_left_ = 0;  // held turns neither released nor dropped
  size_t dropped_ = 0;
  size_t stand_in_answers_ = 0;
  // By the held turn they are for: the previous turn's prompt, then (once it ended) its answer.
  std::unordered_map<size_t, std::vector<int32_t>> histories_;
};

}  // namespace headway::core
