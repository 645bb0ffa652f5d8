// Reads the streams of one response's choices (OpenAI's n) in turn, so that every choice is read
// while it runs: a stop string is seen, and its request aborted upstream, when its text arrives,
// not once the choices before it have ended.
//
// Ownership: shares the streams. Threading: the one consumer thread of every stream.
#pragma once

#include <headway/serving/request_stream.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

namespace headway::serving::http {

// How long one choice of several is waited on at first when none had output; the wait doubles
// while nothing comes, up to the caller's.
inline constexpr std::chrono::milliseconds kChoicePoll{5};

class ChoiceReader {
 public:
  explicit ChoiceReader(std::vector<std::shared_ptr<RequestStream>> streams);

  // Output of a choice that has not ended, into `out`; `index` says whose. A lone choice waits up
  // to `wait`. Several are each read once without waiting (from the one after the last served,
  // so that none starves), then one waits: up to `wait` when `patient`, else kChoicePoll doubling
  // while idle. A chunk that carries its stream's finish ends that choice.
  bool next(StreamChunk& out, size_t& index, std::chrono::milliseconds wait, bool patient = false);

  size_t size() const { return streams_.size(); }
  RequestStream& stream(size_t index) const { return *streams_[index]; }
  bool ended(size_t index) const { return ended_[index]; }
  bool all_ended() const { return ended_count_ == streams_.size(); }

 private:
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<bool> ended_;
  size_t ended_count_ = 0;
  size_t next_ = 0;  // where the next look starts
  std::chrono::milliseconds idle_wait_ = kChoicePoll;
};

}  // namespace headway::serving::http
