// Waits for a non-streamed request's whole output (every choice's) on the handler's worker thread.
//
// The wait polls the stream (kStreamPoll) so that a stopping frontend aborts the request instead
// of holding shutdown up for a long generation, and asks `client` at every poll whether the client
// is still connected (the watch looks once a second): a request whose client went away is
// aborted, as vLLM does, rather than generated to its end for nobody.
//
// Ownership: borrows everything. Threading: the one consumer thread of the streams.
#pragma once

#include <headway/serving/generation_service.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "choice_reader.h"
#include "client_connection_watch.h"

namespace headway::serving::http {

struct Completion {
  std::string text;
  std::vector<int32_t> token_ids;               // every generated token, in order
  std::vector<GeneratedLogprobs> logprobs;      // one per token, when the request asked for them
  std::vector<PromptLogprobs> prompt_logprobs;  // one per prompt token, when asked for
  Finish finish = Finish::kNone;                // kLength or kStop
  StopReason stop_reason;  // kStop: the stop string or stop token id, when one ended it
  Usage usage;
};

// Reads every choice's stream to its end (ChoiceReader: each is read while it runs). Throws
// ApiError: 503 when a request was aborted (drain) or the frontend is stopping, 500 when
// generation failed, a refusal's own status when the service refused it, 499 (nginx's "client
// closed request"; nobody reads it) when the client went; the choices still running are then
// aborted.
std::vector<Completion> collect_completions(GenerationService& service, ChoiceReader& choices,
                                            const std::atomic<bool>& stopping,
                                            ClientConnectionWatch& client);

}  // namespace headway::serving::http
