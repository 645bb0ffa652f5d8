// Sends one request's streams (one per choice: OpenAI's n) to its client as Server-Sent Events,
// from inside cpp-httplib's chunked content provider: provide() is called over and over on the
// connection's worker thread until every stream ended, and release() once afterwards. Choices
// interleave as their tokens come; each event names its choice's index. What the events look like
// is the StreamFormat's (the chat and completions chunks, or the Responses API's events).
//
// A client that goes away is noticed on the next write: a token's event, or the SSE comment sent
// after kKeepAliveAfter without one (so a stalled prefill cannot hide a disconnect). The write
// fails, cpp-httplib releases the provider unfinished, and release() aborts the request in the
// service so its KV blocks are freed. A choice that fails ends the response with an error event,
// and the other choices are aborted.
//
// Ownership: shares the stream with the service and borrows the service and the stopping flag
// (owned by the HttpFrontend, which outlives every response). Threading: one worker thread.
#pragma once

#include <headway/serving/generation_service.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "answer_parser.h"
#include "choice_reader.h"
#include "openai_logprobs.h"
#include "openai_response.h"
#include "stream_format.h"

namespace httplib {
class DataSink;
}

namespace headway::serving::http {

inline constexpr std::chrono::milliseconds kStreamPoll{100};
inline constexpr std::chrono::milliseconds kKeepAliveAfter{1000};

// Completions' echo in a stream: each choice's first event is its prompt's text and, with
// logprobs, the prompt's tokens (vLLM puts them in the event of the first token; an event of their
// own reads the same to a client that joins texts and lists). `prompt_texts`: one per prompt,
// choice i answering prompt i / n. `prompt_only` (max_tokens 0): the choice is the prompt alone;
// its one generated token is left out of the events and the usage, and it ends with "length".
struct StreamEcho {
  std::vector<std::string> prompt_texts;  // empty: no echo
  bool prompt_only = false;
  // Chat's echo (OpenAiRequest::chat_echo): sent as each choice's first content, once every role
  // chunk is out and before any token, as vLLM sends it. Empty: none.
  std::string chat_message;
};

class SseResponder {
 public:
  // `streams`: one per choice, in index order (at least one). `top_logprobs`: the request's
  // SamplingParams::logprobs (used when header.logprobs).
  // `answer_parser`: chat with reasoning or tool calls parsed; each choice runs its text through a
  // copy. `format`: writes the events (not null).
  SseResponder(GenerationService& service, std::vector<std::shared_ptr<RequestStream>> streams,
               ResponseHeader header, int32_t top_logprobs, const std::atomic<bool>& stopping,
               std::unique_ptr<StreamFormat> format,
               const std::optional<AnswerParser>& answer_parser = std::nullopt,
               StreamEcho echo = {});

  // Waits up to kStreamPoll for output and writes what arrived. Returns false when a write failed
  // (the client is gone); calls sink.done() after the last event.
  bool provide(httplib::DataSink& sink);

  // cpp-httplib's resource releaser: aborts the requests unless their streams were sent to the
  // end.
  void release(bool success);

 private:
  struct Choice {
    LogprobsJson logprobs;
    uint32_t completion_tokens = 0;  // generated so far (usage)
    std::optional<AnswerParser> parser;
    uint32_t calls_sent = 0;  // the index of its next tool call
    // Echo: the prompt's text until the first event carries it, and its figures gathered till then.
    std::optional<std::string> echo_text = std::nullopt;
    std::vector<PromptLogprobs> echo_figures = {};
  };

  // The usage so far: each prompt once, every choice's tokens.
  Usage usage() const;
  bool write(httplib::DataSink& sink, const std::string& data);
  bool finish(httplib::DataSink& sink, size_t index, const StreamChunk& last);
  // The chunk's text as the client gets it: through the choice's answer parser when it has one
  // (`last`: the answer ended), which leaves its reasoning and the calls it completed in pieces_.
  const std::string& content_of(Choice& choice, const StreamChunk& chunk, bool last);
  // Whether a chunk that does not end the stream makes an event (content, reasoning, calls, or
  // ids or logprobs the client asked for).
  bool has_content(const std::string& content, const StreamChunk& chunk) const;
  // The delta event of `chunk` for choice `index`, with `content` and pieces_' reasoning and
  // calls.
  std::string delta_event(size_t index, const std::string& content, const StreamChunk& chunk,
                          Finish finish, const StopReason& stop_reason);
  // An event of text alone (an echo), with `logprobs`.
  std::string text_event(size_t index, std::string_view text, nlohmann::ordered_json logprobs);
  // The echo's event of choice `index`, once its first token (or its end) came: the prompt's text
  // and, with logprobs, its tokens' (whose text offsets the choice's later tokens continue).
  std::string echo_event(size_t index);
  // Ends the response with an error event; aborts the choices that have not ended.
  bool fail(httplib::DataSink& sink, const ApiError& error);
  void abort_running();

  GenerationService& service_;
  const ResponseHeader header_;
  std::unique_ptr<StreamFormat> format_;
  ChoiceReader reader_;
  std::vector<Choice> choices_;
  const std::atomic<bool>& stopping_;
  bool opened_ = false;
  bool ended_ = false;  // [DONE] written: nothing left to abort
  std::chrono::steady_clock::time_point last_write_;
  StreamChunk chunk_;    // reused between calls
  AnswerPieces pieces_;  // content_of's, reused
  StreamEcho echo_;
};

}  // namespace headway::serving::http
