#include <headway/serving/request_stream.h>
#include <sys/mman.h>

#include <utility>

namespace headway::serving {

const char* finish_name(Finish finish) {
  switch (finish) {
    case Finish::kNone:
      return "";
    case Finish::kLength:
      return "length";
    case Finish::kStop:
      return "stop";
    case Finish::kAbort:
      return "abort";
    case Finish::kError:
      return "error";
    case Finish::kHandoff:
      return "handoff";
  }
  return "";
}

RequestStream::RequestStream(std::string id, uint32_t prompt_tokens,
                             std::unique_ptr<IncrementalDecoder> decoder,
                             std::function<void(const std::string& id)> on_stop_string,
                             bool admitted)
    : id_(std::move(id)),
      prompt_tokens_(prompt_tokens),
      decoder_(std::move(decoder)),
      on_stop_string_(std::move(on_stop_string)),
      admitted_(admitted) {}

RequestStream::~RequestStream() {
  // A staged KV nobody took (the frontend went away first) has nobody left to remove it.
  if (kv_stage_ && !kv_stage_taken_) ::shm_unlink(kv_stage_->shm_name.c_str());
}

void RequestStream::push_tokens(std::span<const int32_t> ids,
                                std::span<const core::SampledLogprobs> logprobs) {
  {
    std::lock_guard lock(mutex_);
    if (finish_ != Finish::kNone) return;
    pending_.insert(pending_.end(), ids.begin(), ids.end());
    if (logprobs.size() != ids.size()) logprobs = {};
    for (const core::SampledLogprobs& token : logprobs) {
      pending_logprobs_.push_back(token.logprob);
      pending_top_counts_.push_back(static_cast<uint32_t>(token.top.size()));
      pending_top_.insert(pending_top_.end(), token.top.begin(), token.top.end());
    }
    completion_tokens_ += static_cast<uint32_t>(ids.size());
  }
  ready_.notify_one();
}

void RequestStream::expect_prompt_logprobs(int32_t first_token) {
  std::lock_guard lock(mutex_);
  first_prompt_token_ = first_token;
}

void RequestStream::push_prompt_logprobs(std::span<const core::PromptTokenLogprobs> entries) {
  {
    std::lock_guard lock(mutex_);
    if (finish_ != Finish::kNone || completion_tokens_ > 0) return;
    for (const core::PromptTokenLogprobs& entry : entries) {
      if (entry.position < next_prompt_position_) continue;
      PromptFigures& kept = pending_prompt_.emplace_back();
      kept.figures = entry;
      kept.figures.top = {};
      kept.top.assign(entry.top.begin(), entry.top.end());
      next_prompt_position_ = entry.position + 1;
    }
  }
  ready_.notify_one();
}

void RequestStream::finish(Finish reason, Timings timings, std::string error,
                           std::optional<KvStage> kv_stage) {
  {
    std::lock_guard lock(mutex_);
    if (finish_ != Finish::kNone) return;
    finish_ = reason == Finish::kNone ? Finish::kError : reason;
    timings_ = timings;
    error_ = std::move(error);
    kv_stage_ = std::move(kv_stage);
  }
  ready_.notify_one();
}

void RequestStream::refuse(ServiceError refusal, Timings timings) {
  {
    std::lock_guard lock(mutex_);
    if (finish_ != Finish::kNone) return;
    finish_ = Finish::kError;
    timings_ = timings;
    error_ = refusal.what();
    refusal_ = std::move(refusal);
  }
  ready_.notify_one();
}

void RequestStream::note_cached_prompt_tokens(uint32_t tokens) {
  std::lock_guard lock(mutex_);
  if (finish_ == Finish::kNone) cached_prompt_tokens_ = tokens;
}

uint32_t RequestStream::cached_prompt_tokens() const {
  std::lock_guard lock(mutex_);
  return cached_prompt_tokens_;
}

void RequestStream::admit() {
  {
    std::lock_guard lock(mutex_);
    if (admitted_) return;
    admitted_ = true;
  }
  ready_.notify_one();
}

bool RequestStream::wait_admitted(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return ready_.wait_for(lock, timeout, [&] { return admitted_ || has_news(); });
}

std::optional<ServiceError> RequestStream::refusal() const {
  std::lock_guard lock(mutex_);
  return refusal_;
}

bool RequestStream::done() const {
  std::lock_guard lock(mutex_);
  return delivered_finish_;
}

bool RequestStream::next(StreamChunk& out, std::chrono::milliseconds timeout) {
  out.token_ids.clear();
  out.logprobs.clear();
  out.prompt_logprobs.clear();
  out.text.clear();
  out.finish = Finish::kNone;
  out.stop_reason = StopReason();
  out.error.clear();
  out.refusal.reset();
  out.kv_stage.reset();
  Finish finish = Finish::kNone;
  std::optional<int32_t> first_prompt_token;
  {
    std::unique_lock lock(mutex_);
    if (delivered_finish_) return false;
    ready_.wait_for(lock, timeout, [&] { return has_news(); });
    if (!has_news()) return false;
    taken_.swap(pending_);
    pending_.clear();
    taken_logprobs_.swap(pending_logprobs_);
    pending_logprobs_.clear();
    taken_top_counts_.swap(pending_top_counts_);
    pending_top_counts_.clear();
    taken_top_.swap(pending_top_);
    pending_top_.clear();
    taken_prompt_.swap(pending_prompt_);
    pending_prompt_.clear();
    first_prompt_token = std::exchange(first_prompt_token_, std::nullopt);
    finish = finish_;
    out.usage = {prompt_tokens_, completion_tokens_, cached_prompt_tokens_};
    out.timings = timings_;
    out.error = error_;
  }
  out.token_ids.assign(taken_.begin(), taken_.end());
  taken_.clear();
  delivered_tokens_ += static_cast<uint32_t>(out.token_ids.size());
  take_logprobs(out);
  take_prompt_logprobs(out, first_prompt_token);

  if (decoder_ != nullptr) {
    out.text = decoder_->append(out.token_ids);
    if (decoder_->stopped()) {
      // The stop string ends the request here, whatever the producer does next. The ids after the
      // one that completed it (a read brings every id generated since the last, and the engine
      // goes on until the abort reaches it) are not the answer's: neither its ids, its logprobs
      // nor its usage, whatever the timing.
      if (on_stop_string_) on_stop_string_(id_);
      const size_t answer = decoder_->ids_before_stop();
      const size_t before = delivered_tokens_ - out.token_ids.size();  // by earlier reads
      const size_t keep = std::min(out.token_ids.size(), answer > before ? answer - before : 0);
      out.token_ids.resize(keep);
      if (out.logprobs.size() > keep) out.logprobs.resize(keep);
      delivered_tokens_ = static_cast<uint32_t>(before + keep);
      std::lock_guard lock(mutex_);
      delivered_finish_ = true;
      out.finish = Finish::kStop;
      out.error.clear();  // an abort that crossed the stop string's (a drain's) is not this end
      out.stop_reason = decoder_->stop_reason();
      out.usage = {prompt_tokens_, delivered_tokens_, cached_prompt_tokens_};
      return true;
    }
    if (finish != Finish::kNone) {
      out.text += decoder_->flush();
      // A stop string completed only by the held bytes given out at the end (an incomplete
      // character's U+FFFD) ends the request as a stop, as its text says, when it ended normally.
      if (decoder_->stopped() && finish == Finish::kLength) finish = Finish::kStop;
    }
  }
  if (finish != Finish::kNone) {
    std::lock_guard lock(mutex_);
    delivered_finish_ = true;
    out.finish = finish;
    if (finish == Finish::kStop && decoder_ != nullptr) out.stop_reason = decoder_->stop_reason();
    out.refusal = refusal_;
    out.kv_stage = kv_stage_;
    kv_stage_taken_ = kv_stage_.has_value();
  }
  return true;
}

void RequestStream::take_logprobs(StreamChunk& out) {
  // Pushed with logprobs, every id has its entry (the producer pushes a request's tokens one way).
  const size_t count = std::min(taken_logprobs_.size(), out.token_ids.size());
  const auto bytes_of = [&](int32_t id) {
    return decoder_ != nullptr ? decoder_->token_bytes(id) : std::string();
  };
  size_t top = 0;
  out.logprobs.resize(count);
  for (size_t i = 0; i < count; ++i) {
    GeneratedLogprobs& token = out.logprobs[i];
    token.chosen = TokenCandidate{out.token_ids[i], taken_logprobs_[i], bytes_of(out.token_ids[i])};
    token.top.clear();
    for (uint32_t k = 0; k < taken_top_counts_[i] && top < taken_top_.size(); ++k, ++top) {
      const core::TokenLogprob& candidate = taken_top_[top];
      token.top.push_back(
          TokenCandidate{candidate.token, candidate.logprob, bytes_of(candidate.token)});
    }
  }
  taken_logprobs_.clear();
  taken_top_counts_.clear();
  taken_top_.clear();
}

void RequestStream::take_prompt_logprobs(StreamChunk& out,
                                         std::optional<int32_t> first_prompt_token) {
  const auto candidate = [&](int32_t id, float logprob) {
    return TokenCandidate{id, logprob, decoder_ != nullptr ? decoder_->token_bytes(id) : ""};
  };
  if (first_prompt_token) {
    PromptLogprobs& first = out.prompt_logprobs.emplace_back();
    first.position = 0;
    first.has_figures = false;
    first.token = candidate(*first_prompt_token, 0.0f);
  }
  for (const PromptFigures& taken : taken_prompt_) {
    PromptLogprobs& entry = out.prompt_logprobs.emplace_back();
    entry.position = taken.figures.position;
    entry.token = candidate(taken.figures.token, taken.figures.logprob);
    entry.rank = taken.figures.rank;
    for (const core::TokenLogprob& top : taken.top) {
      entry.top.push_back(candidate(top.token, top.logprob));
    }
  }
  taken_prompt_.clear();
}

}  // namespace headway::serving
