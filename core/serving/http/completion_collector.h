// Waits for a non-streamed request's whole output on the handler's worker thread.
//
// The wait polls the stream (kStreamPoll) so that a stopping frontend aborts the request instead
// of holding shutdown up for a long generation, and asks `client` at every poll whether the client
// is still connected (the watch looks once a second): a request whose client went away is
// aborted, as vLLM does, rather than generated to its end for nobody.
//
// Ownership: borrows everything. Threading: the one consumer thread of `stream`.
#pragma once

#include <headway/serving/generation_service.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "client_connection_watch.h"

namespace headway::serving::http {

struct Completion {
  std::string text;
  std::vector<int32_t> token_ids;           // every generated token, in order
  std::vector<GeneratedLogprobs> logprobs;  // one per token, when the request asked for them
  Finish finish = Finish::kNone;            // kLength or kStop
  StopReason stop_reason;  // kStop: the stop string or stop token id, when one ended it
  Usage usage;
};

// Throws ApiError: 503 when the request was aborted (drain) or the frontend is stopping, 500 when
// generation failed, 499 (nginx's "client closed request"; nobody reads it) when the client went.
Completion collect_completion(GenerationService& service, RequestStream& stream,
                              const std::atomic<bool>& stopping, ClientConnectionWatch& client);

}  // namespace headway::serving::http
