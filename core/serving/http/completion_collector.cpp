#include "completion_collector.h"

#include <iterator>

#include "api_error.h"
#include "sse_responder.h"

namespace headway::serving::http {

Completion collect_completion(GenerationService& service, RequestStream& stream,
                              const std::atomic<bool>& stopping, ClientConnectionWatch& client) {
  Completion out;
  StreamChunk chunk;
  for (;;) {
    const bool stopping_now = stopping.load();
    // Whether tokens arrive or not: a long answer's client may give up while it streams in.
    if (!stopping_now && client.gone()) {
      service.abort(stream.id());
      throw ApiError(499, "the client closed the connection; the request was aborted");
    }
    const bool got = stream.next(chunk, kStreamPoll);
    // Stopping, the stream is read once more: a drain that ended the request a moment ago (the
    // service forgets a request just before its stream finishes) left a finish that says why.
    if (stopping_now && !(got && chunk.finish != Finish::kNone)) {
      service.abort(stream.id());
      throw ApiError(503, "the server is shutting down; the request was aborted");
    }
    if (!got) continue;
    out.text += chunk.text;
    out.token_ids.insert(out.token_ids.end(), chunk.token_ids.begin(), chunk.token_ids.end());
    out.logprobs.insert(out.logprobs.end(), std::make_move_iterator(chunk.logprobs.begin()),
                        std::make_move_iterator(chunk.logprobs.end()));
    if (chunk.finish == Finish::kNone) continue;
    if (chunk.finish == Finish::kAbort) {
      throw ApiError(503,
                     "the request was aborted" + (chunk.error.empty() ? "" : ": " + chunk.error));
    }
    if (chunk.finish == Finish::kError && chunk.refusal) throw api_error_of(*chunk.refusal);
    if (chunk.finish == Finish::kError) {
      throw ApiError(500,
                     "generation failed: " + (chunk.error.empty() ? "unknown error" : chunk.error));
    }
    out.finish = chunk.finish;
    out.stop_reason = chunk.stop_reason;
    out.usage = chunk.usage;
    return out;
  }
}

}  // namespace headway::serving::http
