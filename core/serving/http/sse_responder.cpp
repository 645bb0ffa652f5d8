#include "sse_responder.h"

#include <httplib.h>

#include "api_error.h"

namespace headway::serving::http {

SseResponder::SseResponder(GenerationService& service,
                           std::vector<std::shared_ptr<RequestStream>> streams,
                           ResponseHeader header, int32_t top_logprobs,
                           const std::atomic<bool>& stopping, std::unique_ptr<StreamFormat> format,
                           const std::optional<AnswerParser>& answer_parser, StreamEcho echo)
    : service_(service),
      header_(std::move(header)),
      format_(std::move(format)),
      reader_(std::move(streams)),
      stopping_(stopping),
      last_write_(std::chrono::steady_clock::now()),
      echo_(std::move(echo)) {
  for (size_t i = 0; i < reader_.size(); ++i) {
    choices_.push_back(Choice{LogprobsJson(header_.endpoint, header_.logprobs ? top_logprobs : -1),
                              0, answer_parser});
    if (answer_parser) choices_.back().parser->follow_prompt(reader_.stream(i).prompt_reasoning());
    if (!echo_.prompt_texts.empty()) {
      choices_.back().echo_text = echo_.prompt_texts.at(i / header_.choices_per_prompt);
    }
  }
}

bool SseResponder::write(httplib::DataSink& sink, const std::string& data) {
  // A format may have nothing to send for a step, and an empty chunk would end a chunked body.
  if (data.empty()) return true;
  if (!sink.write(data.data(), data.size())) return false;
  last_write_ = std::chrono::steady_clock::now();
  return true;
}

Usage SseResponder::usage() const {
  Usage total;
  for (size_t i = 0; i < choices_.size(); ++i) {
    // Each prompt counts once, however many choices it has (its cached tokens: its first
    // choice's).
    if (i % header_.choices_per_prompt == 0) {
      total.prompt_tokens += reader_.stream(i).prompt_tokens();
      total.cached_prompt_tokens += reader_.stream(i).cached_prompt_tokens();
    }
    total.completion_tokens += choices_[i].completion_tokens;
  }
  return total;
}

bool SseResponder::provide(httplib::DataSink& sink) {
  if (ended_) return true;
  if (!opened_) {
    opened_ = true;
    // The opening events go out at once, so clients see the stream open before the first token.
    const std::string opening = format_->opening(static_cast<uint32_t>(choices_.size()), usage());
    if (!opening.empty() && !write(sink, opening)) return false;
    for (size_t i = 0; i < choices_.size() && !echo_.chat_message.empty(); ++i) {
      if (!write(sink, text_event(i, echo_.chat_message, nullptr))) return false;
    }
    if (!opening.empty()) return true;
  }
  const bool stopping = stopping_.load();
  size_t index = 0;
  const bool got = reader_.next(chunk_, index, kStreamPoll, /*patient=*/stopping);
  // Stopping, the streams are read once more: a drain that ended a request a moment ago (the
  // service forgets a request just before its stream finishes) left a finish that says why.
  if (stopping && !(got && chunk_.finish != Finish::kNone)) {
    return fail(sink, ApiError(503, "the server is shutting down; the request was aborted"));
  }
  if (!got) {
    if (std::chrono::steady_clock::now() - last_write_ >= kKeepAliveAfter) {
      return write(sink, kSseKeepAlive);
    }
    return true;
  }
  Choice& choice = choices_[index];
  choice.completion_tokens = echo_.prompt_only ? 0 : chunk_.usage.completion_tokens;
  format_->generated(static_cast<uint32_t>(index), chunk_.token_ids);
  const bool failed = chunk_.finish == Finish::kAbort || chunk_.finish == Finish::kError;
  if (choice.echo_text && !failed) {
    // The prompt's figures all come before its first token: the echo waits for that, or the end.
    choice.echo_figures.insert(choice.echo_figures.end(),
                               std::make_move_iterator(chunk_.prompt_logprobs.begin()),
                               std::make_move_iterator(chunk_.prompt_logprobs.end()));
    if (chunk_.token_ids.empty() && chunk_.finish == Finish::kNone) return true;
    if (!write(sink, echo_event(index))) return false;
  }
  if (echo_.prompt_only && !failed) {
    // The prompt alone: what was generated to run it is not part of the answer.
    chunk_.token_ids.clear();
    chunk_.logprobs.clear();
    chunk_.text.clear();
    if (chunk_.finish != Finish::kNone) {
      chunk_.finish = Finish::kLength;
      chunk_.stop_reason.emplace<std::monostate>();
    }
  }
  if (chunk_.finish != Finish::kNone) return finish(sink, index, chunk_);
  // Tokens whose text is still held back (a partial UTF-8 sequence, a possible stop string) or
  // that have none make no event of their own, unless the client asked for the token ids or
  // their logprobs.
  const std::string& content = content_of(choice, chunk_, /*last=*/false);
  if (!has_content(content, chunk_)) return true;
  return write(sink, delta_event(index, content, chunk_, Finish::kNone, {}));
}

const std::string& SseResponder::content_of(Choice& choice, const StreamChunk& chunk, bool last) {
  pieces_.clear();
  if (!choice.parser) return chunk.text;
  choice.parser->feed(chunk.text, pieces_);
  if (last) choice.parser->finish(pieces_);
  return pieces_.content;
}

bool SseResponder::has_content(const std::string& content, const StreamChunk& chunk) const {
  return !content.empty() || !pieces_.reasoning.empty() || !pieces_.calls.empty() ||
         ((header_.return_token_ids || header_.logprobs) && !chunk.token_ids.empty());
}

std::string SseResponder::delta_event(size_t index, const std::string& content,
                                      const StreamChunk& chunk, Finish finish,
                                      const StopReason& stop_reason) {
  Choice& choice = choices_[index];
  nlohmann::ordered_json logprobs = choice.logprobs.value(chunk.logprobs);
  StreamDelta delta{static_cast<uint32_t>(index),
                    content,
                    chunk.token_ids,
                    finish,
                    &stop_reason,
                    usage(),
                    &logprobs,
                    {pieces_.reasoning, pieces_.calls, choice.calls_sent,
                     choice.parser && choice.parser->called_tools()}};
  choice.calls_sent += static_cast<uint32_t>(pieces_.calls.size());
  return format_->delta(delta);
}

std::string SseResponder::text_event(size_t index, std::string_view text,
                                     nlohmann::ordered_json logprobs) {
  StreamDelta delta;
  delta.index = static_cast<uint32_t>(index);
  delta.content = text;
  delta.usage = usage();
  delta.logprobs = &logprobs;
  return format_->delta(delta);
}

std::string SseResponder::echo_event(size_t index) {
  Choice& choice = choices_[index];
  const std::string text = std::move(*choice.echo_text);
  choice.echo_text.reset();
  nlohmann::ordered_json logprobs = choice.logprobs.echoed(choice.echo_figures, {});
  choice.echo_figures.clear();
  return text_event(index, text, std::move(logprobs));
}

bool SseResponder::finish(httplib::DataSink& sink, size_t index, const StreamChunk& last) {
  Choice& choice = choices_[index];
  if (last.finish == Finish::kAbort || last.finish == Finish::kError) {
    // What the parser held back goes out too, before the error says the answer was cut short.
    const std::string& content = content_of(choice, last, /*last=*/true);
    if (has_content(content, last) &&
        !write(sink, delta_event(index, content, last, Finish::kNone, {}))) {
      return false;
    }
    if (last.finish == Finish::kAbort) {
      return fail(sink, ApiError(503, "the request was aborted" +
                                          (last.error.empty() ? "" : ": " + last.error)));
    }
    if (last.refusal) return fail(sink, api_error_of(*last.refusal));
    return fail(sink, ApiError(500, "generation failed: " +
                                        (last.error.empty() ? "unknown error" : last.error)));
  }
  const std::string& content = content_of(choice, last, /*last=*/true);
  if (!write(sink, delta_event(index, content, last, last.finish, last.stop_reason))) {
    return false;
  }
  if (!reader_.all_ended()) return true;
  ended_ = true;
  if (!write(sink, format_->closing(usage()))) return false;
  sink.done();
  return true;
}

void SseResponder::abort_running() {
  for (size_t i = 0; i < reader_.size(); ++i) {
    if (!reader_.ended(i)) service_.abort(reader_.stream(i));
  }
}

bool SseResponder::fail(httplib::DataSink& sink, const ApiError& error) {
  ended_ = true;  // the requests are over in the service either way
  abort_running();
  if (!write(sink, format_->failure(error))) return false;
  sink.done();
  return true;
}

void SseResponder::release(bool /*success*/) {
  // Sent to the end, or ended with an error event: nothing to abort. Otherwise the client went
  // away or the server stopped mid-stream.
  if (!ended_) abort_running();
}

}  // namespace headway::serving::http
