// What the client sees of one streamed completion, turned into the times the report needs: when
// it was sent, when its first token came, when every later token came, when it ended, or why it
// failed. All times are seconds on the run's clock (run_clock.h).
//
// Tokens per chunk: a chunk counts the tokens the server says it carries (completion_chunk.h), or
// one when it has text and no count. When the final usage chunk reports more completion tokens
// than the chunks were counted to carry (a server that batches tokens per chunk without saying
// so), the missing ones are spread evenly over the content chunks, the remainder going to the
// latest ones: the client cannot know better, and it keeps the token count right for TPOT.
// Token times: the k tokens of a chunk that arrives at t after the previous content chunk at
// t_prev get the times t_prev + (t - t_prev) * j / k, j = 1..k, so that a burst of k tokens shows
// as k equal gaps rather than one long gap and k - 1 zero ones (the ITL a per-token stream of the
// same pace would show). The first chunk's tokens all get its arrival time: TTFT is the first
// token's, and nothing earlier bounds the others.
//
// Ownership: plain value. Threading: one per stream, used by one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headway/serving/bench/sse_parser.h"

namespace headway::serving::bench {

enum class FailureKind : uint8_t {
  kNone,
  kTransport,    // no connection, or the connection broke (httplib's error)
  kHttpStatus,   // the server answered with a status other than 200
  kStreamError,  // an error event or an {"error": ...} payload inside the stream
  kBadChunk,     // a payload that is not a completion chunk
  kCutShort,     // the stream ended before "data: [DONE]"
  kNoTokens,     // "[DONE]" came without any token
  // The server counted far more completion tokens (its usage, or its chunks) than the request's
  // max_tokens (over kTooManyTokensFactor times it plus kTooManyTokensSlack): its figures cannot be
  // trusted, and a count in the millions must not become as many token times.
  kTooManyTokens,
  kInterrupted,  // bench was interrupted (SIGINT, SIGTERM) while the stream ran
  // Never sent: a conversation turn that waits for answers, after a turn of it that failed
  // (arrival_schedule.h).
  kEarlierTurnFailed,
};
inline constexpr size_t kFailureKinds = 10;
inline constexpr uint64_t kTooManyTokensFactor = 2;
inline constexpr uint64_t kTooManyTokensSlack = 16;

// "transport", "http_status", ... (the JSON keys of the report).
std::string_view failure_name(FailureKind kind);

struct StreamResult {
  double sent = 0;
  uint32_t prompt_tokens = 0;  // as sent, set by the sender; 0: the workload request's
  double first_token;          // NaN without a token
  double finish;               // time of "[DONE]" or of the failure
  std::vector<double> token_times;
  uint32_t output_tokens = 0;                       // token_times.size()
  std::optional<uint32_t> usage_completion_tokens;  // what the server's usage said, if it did
  std::optional<uint32_t> usage_cached_tokens;      // its prompt tokens found cached, if it said
  std::optional<std::string> finish_reason;
  // The answer's ids, when kept (StreamMeasurement's keep_ids) and every chunk with tokens carried
  // them; empty otherwise.
  std::vector<int32_t> token_ids;
  FailureKind failure = FailureKind::kNone;
  int http_status = 0;  // when failure == kHttpStatus
  std::string message;  // why it failed; empty when it did not
  bool ok() const { return failure == FailureKind::kNone; }
};

class StreamMeasurement {
 public:
  // `max_tokens`: the request's; far more tokens than that is a failure (kTooManyTokens); 0: no
  // bound. `keep_ids`: collect the answer's ids (StreamResult::token_ids).
  explicit StreamMeasurement(double sent, uint32_t max_tokens = 0, bool keep_ids = false)
      : sent_(sent), max_tokens_(max_tokens), keep_ids_(keep_ids) {}

  // One event received at `now`. Events after "[DONE]" or a failure are ignored.
  void on_event(const SseEvent& event, double now);

  // Records a failure found outside the events (status, transport); the first failure wins, and
  // none counts after "[DONE]".
  void fail(FailureKind kind, std::string message, double now, int http_status = 0);

  // The result once the response is over (at `now`): without "[DONE]" or a failure the stream
  // was cut short.
  StreamResult finish(double now) const;

 private:
  struct Chunk {
    double time;
    uint32_t tokens;
  };

  double sent_;
  uint32_t max_tokens_;
  bool keep_ids_;
  std::vector<Chunk> chunks_;
  std::vector<int32_t> ids_;
  bool ids_whole_ = true;                  // every chunk with tokens carried its ids
  std::optional<uint32_t> running_usage_;  // last usage.completion_tokens seen on a content chunk
  std::optional<uint32_t> final_usage_;
  std::optional<uint32_t> cached_tokens_;  // the last usage that said
  std::optional<std::string> finish_reason_;
  bool done_ = false;
  double done_time_ = 0;
  FailureKind failure_ = FailureKind::kNone;
  int http_status_ = 0;
  std::string message_;
  double failure_time_ = 0;
};

}  // namespace headway::serving::bench
