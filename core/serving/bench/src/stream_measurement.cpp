#include "headway/serving/bench/stream_measurement.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/request_record.h>

#include <algorithm>

#include "headway/serving/bench/completion_chunk.h"

namespace headway::serving::bench {

std::string_view failure_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::kNone:
      return "none";
    case FailureKind::kTransport:
      return "transport";
    case FailureKind::kHttpStatus:
      return "http_status";
    case FailureKind::kStreamError:
      return "stream_error";
    case FailureKind::kBadChunk:
      return "bad_chunk";
    case FailureKind::kCutShort:
      return "cut_short";
    case FailureKind::kNoTokens:
      return "no_tokens";
    case FailureKind::kTooManyTokens:
      return "too_many_tokens";
    case FailureKind::kInterrupted:
      return "interrupted";
    case FailureKind::kEarlierTurnFailed:
      return "earlier_turn_failed";
  }
  return "unknown";
}

void StreamMeasurement::on_event(const SseEvent& event, double now) {
  if (done_ || failure_ != FailureKind::kNone) return;
  if (event.data == "[DONE]") {
    done_ = true;
    done_time_ = now;
    return;
  }
  CompletionChunk chunk;
  try {
    chunk = parse_completion_chunk(event.data, keep_ids_);
  } catch (const core::Error& e) {
    // An error event need not carry JSON; its data is the message then.
    if (event.event == "error") {
      fail(FailureKind::kStreamError, event.data, now);
    } else {
      fail(FailureKind::kBadChunk, e.what(), now);
    }
    return;
  }
  if (chunk.error || event.event == "error") {
    fail(FailureKind::kStreamError, chunk.error.value_or(event.data), now);
    return;
  }
  if (chunk.finish_reason) finish_reason_ = chunk.finish_reason;
  if (chunk.usage_cached_tokens) cached_tokens_ = chunk.usage_cached_tokens;
  if (!chunk.has_choice) {  // the usage-only chunk that include_usage adds at the end
    if (chunk.usage_completion_tokens) final_usage_ = chunk.usage_completion_tokens;
    return;
  }
  std::optional<uint32_t> tokens = chunk.tokens;
  if (chunk.usage_completion_tokens) {
    // A running count (vLLM's continuous usage stats), or a server's final count riding on its
    // last content chunk: either way the chunk adds what the count has beyond the tokens already
    // counted, which the first count must not ignore (that counted every token twice).
    uint32_t counted = 0;
    if (!running_usage_) {
      for (const Chunk& c : chunks_) counted += c.tokens;
    }
    const uint32_t before = running_usage_.value_or(counted);
    const uint32_t total = *chunk.usage_completion_tokens;
    tokens = total > before ? total - before : 0;
    running_usage_ = total;
  }
  const uint32_t count = tokens.value_or(chunk.text.empty() ? 0 : 1);
  if (count > 0) chunks_.push_back({now, count});
  if (keep_ids_ && count > 0 && ids_whole_) {
    if (chunk.token_ids.size() == count) {
      ids_.insert(ids_.end(), chunk.token_ids.begin(), chunk.token_ids.end());
    } else {
      ids_whole_ = false;
      ids_.clear();
    }
  }
}

void StreamMeasurement::fail(FailureKind kind, std::string message, double now, int http_status) {
  // After "[DONE]" the stream is complete; a connection that then breaks does not undo it.
  if (done_ || failure_ != FailureKind::kNone) return;
  failure_ = kind;
  message_ = std::move(message);
  http_status_ = http_status;
  failure_time_ = now;
}

StreamResult StreamMeasurement::finish(double now) const {
  StreamResult r;
  r.sent = sent_;
  r.first_token = chunks_.empty() ? core::kNever : chunks_.front().time;
  r.usage_completion_tokens = final_usage_ ? final_usage_ : running_usage_;
  r.usage_cached_tokens = cached_tokens_;
  r.finish_reason = finish_reason_;
  r.failure = failure_;
  r.http_status = http_status_;
  r.message = message_;
  r.finish = failure_ != FailureKind::kNone ? failure_time_ : done_ ? done_time_ : now;
  if (r.ok() && !done_) {
    r.failure = FailureKind::kCutShort;
    r.message = "the stream ended before 'data: [DONE]'";
  } else if (r.ok() && chunks_.empty()) {
    r.failure = FailureKind::kNoTokens;
    r.message = "the stream finished without a token";
  }

  std::vector<uint32_t> counts;
  uint64_t counted = 0;
  for (const Chunk& c : chunks_) {
    counts.push_back(c.tokens);
    counted += c.tokens;
  }
  // The server's own count when it gave one, else the chunks'. A little over max_tokens is left
  // alone (a server may count a stop token, or flush one chunk more); what is refused is a count no
  // stream of max_tokens could explain.
  const uint64_t claimed = r.usage_completion_tokens.value_or(counted);
  if (max_tokens_ > 0 &&
      claimed > kTooManyTokensFactor * uint64_t{max_tokens_} + kTooManyTokensSlack) {
    // Checked before the token times are spread: a usage of a million tokens would be a million.
    if (r.failure == FailureKind::kNone || r.failure == FailureKind::kCutShort) {
      r.failure = FailureKind::kTooManyTokens;
      r.message = fmt::format("the server counted {} completion tokens for max_tokens {}", claimed,
                              max_tokens_);
    }
    r.output_tokens = 0;
    return r;
  }
  if (r.usage_completion_tokens && *r.usage_completion_tokens > counted && !counts.empty()) {
    const uint64_t missing = *r.usage_completion_tokens - counted;
    const size_t n = counts.size();
    for (size_t i = 0; i < n; ++i) {
      counts[i] += static_cast<uint32_t>(missing / n + (i >= n - missing % n ? 1 : 0));
    }
  }
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const double t = chunks_[i].time;
    const double t_prev = i == 0 ? t : chunks_[i - 1].time;
    for (uint32_t j = 1; j <= counts[i]; ++j) {
      r.token_times.push_back(t_prev + (t - t_prev) * j / counts[i]);
    }
  }
  r.output_tokens = static_cast<uint32_t>(r.token_times.size());
  if (keep_ids_ && ids_whole_ && ids_.size() == r.output_tokens) r.token_ids = ids_;
  return r;
}

}  // namespace headway::serving::bench
