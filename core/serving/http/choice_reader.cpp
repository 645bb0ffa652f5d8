#include "choice_reader.h"

#include <algorithm>

namespace headway::serving::http {

ChoiceReader::ChoiceReader(std::vector<std::shared_ptr<RequestStream>> streams)
    : streams_(std::move(streams)), ended_(streams_.size(), false) {}

bool ChoiceReader::next(StreamChunk& out, size_t& index, std::chrono::milliseconds wait,
                        bool patient) {
  const auto take = [&](size_t i, std::chrono::milliseconds timeout) {
    if (!streams_[i]->next(out, timeout)) return false;
    index = i;
    next_ = i + 1;
    if (out.finish != Finish::kNone) {
      ended_[i] = true;
      ++ended_count_;
    }
    return true;
  };
  if (streams_.size() == 1) return !ended_[0] && take(0, wait);
  size_t waiting_on = streams_.size();
  for (size_t k = 0; k < streams_.size(); ++k) {
    const size_t i = (next_ + k) % streams_.size();
    if (ended_[i]) continue;
    if (take(i, std::chrono::milliseconds(0))) {
      idle_wait_ = kChoicePoll;
      return true;
    }
    if (waiting_on == streams_.size()) waiting_on = i;
  }
  if (waiting_on == streams_.size()) return false;  // every choice ended
  const std::chrono::milliseconds timeout = patient ? wait : std::min(idle_wait_, wait);
  if (take(waiting_on, timeout)) {
    idle_wait_ = kChoicePoll;
    return true;
  }
  next_ = waiting_on + 1;
  idle_wait_ = std::min(idle_wait_ * 2, wait);
  return false;
}

}  // namespace headway::serving::http
