#include "completion_collector.h"

#include <iterator>

#include "api_error.h"
#include "sse_responder.h"

namespace headway::serving::http {
namespace {

void abort_running(GenerationService& service, const ChoiceReader& choices) {
  for (size_t i = 0; i < choices.size(); ++i) {
    if (!choices.ended(i)) service.abort(choices.stream(i));
  }
}

}  // namespace

std::vector<Completion> collect_completions(GenerationService& service, ChoiceReader& choices,
                                            const std::atomic<bool>& stopping,
                                            ClientConnectionWatch& client) {
  std::vector<Completion> out(choices.size());
  StreamChunk chunk;
  while (!choices.all_ended()) {
    const bool stopping_now = stopping.load();
    // Whether tokens arrive or not: a long answer's client may give up while it streams in.
    if (!stopping_now && client.gone()) {
      abort_running(service, choices);
      throw ApiError(499, "the client closed the connection; the request was aborted");
    }
    size_t index = 0;
    const bool got = choices.next(chunk, index, kStreamPoll, /*patient=*/stopping_now);
    // Stopping, the streams are read once more: a drain that ended a request a moment ago (the
    // service forgets a request just before its stream finishes) left a finish that says why.
    if (stopping_now && !(got && chunk.finish != Finish::kNone)) {
      abort_running(service, choices);
      throw ApiError(503, "the server is shutting down; the request was aborted");
    }
    if (!got) continue;
    Completion& completion = out[index];
    completion.text += chunk.text;
    completion.token_ids.insert(completion.token_ids.end(), chunk.token_ids.begin(),
                                chunk.token_ids.end());
    completion.logprobs.insert(completion.logprobs.end(),
                               std::make_move_iterator(chunk.logprobs.begin()),
                               std::make_move_iterator(chunk.logprobs.end()));
    completion.prompt_logprobs.insert(completion.prompt_logprobs.end(),
                                      std::make_move_iterator(chunk.prompt_logprobs.begin()),
                                      std::make_move_iterator(chunk.prompt_logprobs.end()));
    if (chunk.finish == Finish::kNone) continue;
    if (chunk.finish == Finish::kAbort || chunk.finish == Finish::kError) {
      abort_running(service, choices);
      if (chunk.finish == Finish::kAbort) {
        throw ApiError(503,
                       "the request was aborted" + (chunk.error.empty() ? "" : ": " + chunk.error));
      }
      if (chunk.refusal) throw api_error_of(*chunk.refusal);
      throw ApiError(500,
                     "generation failed: " + (chunk.error.empty() ? "unknown error" : chunk.error));
    }
    completion.finish = chunk.finish;
    completion.stop_reason = chunk.stop_reason;
    completion.usage = chunk.usage;
  }
  return out;
}

}  // namespace headway::serving::http
