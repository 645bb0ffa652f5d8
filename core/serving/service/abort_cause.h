// Why a request in flight was told to stop before its end: what its stream's finish says and how
// the metrics count it. Shared by the in-process service (engine drivers) and the router's
// service (calls to engine processes).
//
// Threading: plain values; the holders say who touches them.
#pragma once

#include <cstdint>

namespace headway::serving {

enum class AbortCause : uint8_t {
  kNone,        // not aborted
  kClient,      // GenerationService::abort(): the client asked, or its connection went
  kStopString,  // the consumer's decoder matched a stop string: a whole answer, counted as a stop
  kShutdown,    // the server's drain ended (its timeout, a second signal) before the request did
};

// The cause a request keeps when it is aborted twice (a drain after a stop string, say): a stop
// string always wins, since the client has its whole answer; otherwise the first cause stays.
// (A disaggregated request's decode engine may get a drain's abort before the client's, which the
// prefill engine forwards behind the hand-off: that request then says shutdown.)
constexpr AbortCause combined(AbortCause so_far, AbortCause now) {
  if (so_far == AbortCause::kStopString || now == AbortCause::kStopString) {
    return AbortCause::kStopString;
  }
  return so_far == AbortCause::kNone ? now : so_far;
}

// The error an aborted stream carries for `cause` (StreamChunk::error); empty when the client
// itself asked, since it knows why.
constexpr const char* abort_error_text(AbortCause cause) {
  return cause == AbortCause::kShutdown
             ? "the server is shutting down, and its drain ended before the request finished"
             : "";
}

}  // namespace headway::serving
