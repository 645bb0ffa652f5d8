#include "sse_responder.h"

#include <httplib.h>

#include "api_error.h"

namespace headway::serving::http {

SseResponder::SseResponder(GenerationService& service, std::shared_ptr<RequestStream> stream,
                           ResponseHeader header, int32_t top_logprobs,
                           const std::atomic<bool>& stopping)
    : service_(service),
      stream_(std::move(stream)),
      header_(std::move(header)),
      stopping_(stopping),
      last_write_(std::chrono::steady_clock::now()),
      logprobs_(header_.endpoint, header_.logprobs ? top_logprobs : -1) {}

bool SseResponder::write(httplib::DataSink& sink, const std::string& data) {
  if (!sink.write(data.data(), data.size())) return false;
  last_write_ = std::chrono::steady_clock::now();
  return true;
}

bool SseResponder::provide(httplib::DataSink& sink) {
  if (ended_) return true;
  if (!opened_) {
    opened_ = true;
    // The chat role chunk goes out at once, so clients see the stream open before the first token.
    if (header_.endpoint == Endpoint::kChatCompletions) {
      return write(sink, sse_event(role_chunk_json(header_, Usage{stream_->prompt_tokens(), 0})));
    }
  }
  const bool stopping = stopping_.load();
  const bool got = stream_->next(chunk_, kStreamPoll);
  // Stopping, the stream is read once more: a drain that ended the request a moment ago (the
  // service forgets a request just before its stream finishes) left a finish that says why.
  if (stopping && !(got && chunk_.finish != Finish::kNone)) {
    service_.abort(stream_->id());
    return fail(sink, 503, "the server is shutting down; the request was aborted");
  }
  if (!got) {
    if (std::chrono::steady_clock::now() - last_write_ >= kKeepAliveAfter) {
      return write(sink, kSseKeepAlive);
    }
    return true;
  }
  if (chunk_.finish != Finish::kNone) return finish(sink, chunk_);
  // Tokens whose text is still held back (a partial UTF-8 sequence, a possible stop string) or
  // that have none make no event of their own, unless the client asked for the token ids or
  // their logprobs.
  if (!has_content(chunk_)) return true;
  return write(sink,
               sse_event(delta_chunk_json(header_, chunk_.text, chunk_.token_ids, Finish::kNone, {},
                                          chunk_.usage, logprobs_.value(chunk_.logprobs))));
}

bool SseResponder::has_content(const StreamChunk& chunk) const {
  return !chunk.text.empty() ||
         ((header_.return_token_ids || header_.logprobs) && !chunk.token_ids.empty());
}

bool SseResponder::finish(httplib::DataSink& sink, const StreamChunk& last) {
  if (last.finish == Finish::kAbort || last.finish == Finish::kError) {
    if (has_content(last) &&
        !write(sink, sse_event(delta_chunk_json(header_, last.text, last.token_ids, Finish::kNone,
                                                {}, last.usage, logprobs_.value(last.logprobs))))) {
      return false;
    }
    if (last.finish == Finish::kAbort) {
      return fail(sink, 503,
                  "the request was aborted" + (last.error.empty() ? "" : ": " + last.error));
    }
    if (last.refusal) return fail(sink, http_status_of(last.refusal->code()), last.refusal->what());
    return fail(sink, 500,
                "generation failed: " + (last.error.empty() ? "unknown error" : last.error));
  }
  if (!write(sink, sse_event(delta_chunk_json(header_, last.text, last.token_ids, last.finish,
                                              last.stop_reason, last.usage,
                                              logprobs_.value(last.logprobs))))) {
    return false;
  }
  if (header_.include_usage && !write(sink, sse_event(usage_chunk_json(header_, last.usage)))) {
    return false;
  }
  ended_ = true;
  if (!write(sink, kSseDone)) return false;
  sink.done();
  return true;
}

bool SseResponder::fail(httplib::DataSink& sink, int status, const std::string& message) {
  ended_ = true;  // the request is over in the service either way
  if (!write(sink, sse_event(error_json(status, message)))) return false;
  if (!write(sink, kSseDone)) return false;
  sink.done();
  return true;
}

void SseResponder::release(bool /*success*/) {
  // Sent to the end, or ended with an error event: nothing to abort. Otherwise the client went
  // away or the server stopped mid-stream.
  if (!ended_) service_.abort(stream_->id());
}

}  // namespace headway::serving::http
