#include "proxied_generate.h"

#include <fmt/format.h>
#include <headway/core/utf8.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <string_view>

#include "kv_stage_file.h"
#include "proto_conversion.h"
#include "status_mapping.h"

namespace headway::serving {
namespace {

Finish finish_of(const std::string& name) {
  if (name == "length") return Finish::kLength;
  if (name == "stop") return Finish::kStop;
  if (name == "abort") return Finish::kAbort;
  return Finish::kError;
}

// A name an engine process sent, for a message: quoted, cut, and made valid text.
std::string shown_name(std::string_view name) {
  std::string shown = "\"";
  core::utf8::append_valid(name.substr(0, 96), shown);
  return shown + "\"";
}

}  // namespace

ProxiedGenerate::ProxiedGenerate(ProxiedCallOwner& owner, EngineProcess& engine,
                                 EngineSeries& engine_series, RequestSeries series,
                                 std::shared_ptr<RequestStream> stream,
                                 v1::GenerateRequest upstream,
                                 std::chrono::steady_clock::time_point arrival,
                                 uint32_t decode_engine)
    : owner_(owner),
      engine_(engine),
      engine_series_(engine_series),
      series_(series),
      decode_engine_(decode_engine),
      stream_(std::move(stream)),
      upstream_(std::move(upstream)),
      arrival_(arrival) {}

void ProxiedGenerate::continues(const ProxiedGenerate& prefilled) {
  first_token_seconds_ = prefilled.first_token_seconds_;
  last_token_seconds_ = prefilled.last_token_seconds_;
  generated_ = prefilled.generated_;
  // The prompt was counted where it was prefilled.
  any_response_ = false;
  counted_prompt_ = true;
}

void ProxiedGenerate::start(std::shared_ptr<ProxiedGenerate> self) {
  self_ = std::move(self);
  engine_.prepare(context_);
  engine_.stub().async()->Generate(&context_, &upstream_, this);
  StartRead(&response_);
  StartCall();
}

void ProxiedGenerate::mark_cancelled(AbortCause cause) {
  AbortCause so_far = abort_cause_.load();
  while (!abort_cause_.compare_exchange_weak(so_far, combined(so_far, cause))) {
  }
  cancelled_ = true;
}

void ProxiedGenerate::cancel(AbortCause cause) {
  mark_cancelled(cause);
  // A prefill_only call whose first token came has its hand-off (staged or held KV) on the way.
  // Cancelled, the call would never read it, and the KV would wait for the prefill process's
  // timeouts (120 s in /dev/shm, kv_link_hold_s in its engine): a stop string on the first token
  // left it so (helper-168). The hand-off is read instead, and continue_elsewhere() lets go of
  // the KV of a cancelled call; an engine process that stops answering is given up on as ever.
  // A shutdown does not wait for it: cancel_all() has no deadline of its own, and a hand-off
  // that never comes would hold the drain.
  if (handing_off_.load() && cause != AbortCause::kShutdown) return;
  context_.TryCancel();
}

void ProxiedGenerate::give_up() {
  given_up_ = true;
  context_.TryCancel();
}

double ProxiedGenerate::since_arrival() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival_).count();
}

void ProxiedGenerate::OnReadInitialMetadataDone(bool ok) {
  if (!ok) return;
  const auto& metadata = context_.GetServerInitialMetadata();
  if (metadata.find(grpc_frontend::kAcceptedMetadata) != metadata.end()) accepted();
}

void ProxiedGenerate::accepted() {
  stream_->admit();
  // Not before: a call refused or retried elsewhere counts on the process that took it.
  if (!counted_prompt_.exchange(true)) series_.prompt_tokens->add(stream_->prompt_tokens());
}

std::span<const core::SampledLogprobs> ProxiedGenerate::logprobs_of(
    const v1::GenerateResponse& response) {
  logprobs_.clear();
  logprob_top_.clear();
  if (response.logprobs_size() == 0 || response.logprobs_size() != response.token_ids_size()) {
    return {};
  }
  const auto top_count = [](const v1::TokenLogprobs& entry) {
    return static_cast<size_t>(std::min(entry.top_token_ids_size(), entry.top_logprobs_size()));
  };
  // Every top token first, then the spans over them (which growing the vector would move).
  for (const v1::TokenLogprobs& entry : response.logprobs()) {
    for (size_t k = 0; k < top_count(entry); ++k) {
      logprob_top_.push_back(core::TokenLogprob{entry.top_token_ids(static_cast<int>(k)),
                                                entry.top_logprobs(static_cast<int>(k))});
    }
  }
  size_t at = 0;
  for (const v1::TokenLogprobs& entry : response.logprobs()) {
    logprobs_.push_back(core::SampledLogprobs{
        entry.logprob(), std::span(logprob_top_).subspan(at, top_count(entry))});
    at += top_count(entry);
  }
  return logprobs_;
}

void ProxiedGenerate::push_prompt_logprobs(const v1::GenerateResponse& response) {
  prompt_top_.clear();
  prompt_figures_.clear();
  for (const v1::PromptTokenLogprobs& entry : response.prompt_logprobs()) {
    // Position 0 has none: this process's stream adds its entry itself (it knows the prompt).
    if (entry.no_figures()) continue;
    const int count = std::min(entry.top_token_ids_size(), entry.top_logprobs_size());
    for (int k = 0; k < count; ++k) {
      prompt_top_.push_back(core::TokenLogprob{entry.top_token_ids(k), entry.top_logprobs(k)});
    }
  }
  size_t at = 0;
  for (const v1::PromptTokenLogprobs& entry : response.prompt_logprobs()) {
    if (entry.no_figures()) continue;
    const auto count =
        static_cast<size_t>(std::min(entry.top_token_ids_size(), entry.top_logprobs_size()));
    prompt_figures_.push_back(core::PromptTokenLogprobs{entry.position(), entry.token_id(),
                                                        entry.logprob(), entry.rank(),
                                                        std::span(prompt_top_).subspan(at, count)});
    at += count;
  }
  stream_->push_prompt_logprobs(prompt_figures_);
}

void ProxiedGenerate::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended: OnDone follows
  if (!any_response_) {
    // A process that answers has accepted the request, whether or not it said so first.
    accepted();
    any_response_ = true;
  }
  const int count = response_.token_ids_size();
  const std::span<const core::SampledLogprobs> logprobs = logprobs_of(response_);
  if (count > 0 && !finished_ && upstream_.sampling().has_logprobs() && logprobs.empty()) {
    // An engine process that sends tokens without the logprobs asked for (an older build): the
    // client would get them silently missing. The request ends here, and upstream.
    finish(Finish::kError,
           fmt::format("engine{} at {} sent tokens without the logprobs the request asked for "
                       "(does it run an older Headway?)",
                       engine_.index(), engine_.address()));
    context_.TryCancel();
    return;
  }
  if (response_.prompt_logprobs_size() > 0) prompt_figures_seen_ = true;
  if (count > 0 && !finished_ && upstream_.sampling().has_prompt_logprobs() &&
      upstream_.generated_ids().empty() && !prompt_figures_seen_) {
    // Every process that serves them sends position 0's entry before the first token: one that
    // sends none ignored the field (an older build), and the client would miss them silently.
    finish(Finish::kError,
           fmt::format("engine{} at {} sent tokens without the prompt_logprobs the request asked "
                       "for (does it run an older Headway?)",
                       engine_.index(), engine_.address()));
    context_.TryCancel();
    return;
  }
  // The engine process that prefilled the request says what its prefix cache held, in the usage
  // of its last message (a decode process continuing it later says 0: its KV was moved, not
  // found), so a usage before the finish says 0 through a router.
  if (response_.has_usage() && response_.usage().cached_prompt_tokens() > 0 && !finished_) {
    stream_->note_cached_prompt_tokens(response_.usage().cached_prompt_tokens());
  }
  if (response_.prompt_logprobs_size() > 0 && !finished_) push_prompt_logprobs(response_);
  if (count > 0 && !finished_) {
    // Before the tokens reach the stream, whose stop-string check may cancel this call.
    if (upstream_.prefill_only()) handing_off_.store(true);
    const double now = since_arrival();
    if (first_token_seconds_ < 0.0) {
      first_token_seconds_ = now;
      series_.time_to_first_token->observe(now);
      // The tokens that came with the first came at the same time: one gap of 0 each, so that
      // every token after a request's first has its gap (as in one process), and the gaps add up
      // to the time from the first token to the last.
      for (int i = 1; i < count; ++i) series_.inter_token_latency->observe(0.0);
    } else {
      // Tokens that arrive together share the gap since the previous message.
      const double gap = (now - last_token_seconds_) / count;
      for (int i = 0; i < count; ++i) series_.inter_token_latency->observe(gap);
    }
    last_token_seconds_ = now;
    series_.generation_tokens->add(count);
    generated_.insert(generated_.end(), response_.token_ids().begin(), response_.token_ids().end());
    stream_->push_tokens(std::span<const int32_t>(response_.token_ids().data(), count), logprobs);
  }
  if (response_.finish_reason() == "handoff" && !finished_) {
    // Prefilled: the decode process continues the stream from the staged KV (the owner removes
    // the staged object when nobody will).
    finished_ = true;
    // The continuation, if any, is counted on its process as sent from here on.
    expected_at_decode_.settle();
    const std::optional<KvStage> stage =
        response_.has_kv_stage() ? std::optional(grpc_frontend::from_proto(response_.kv_stage()))
                                 : std::nullopt;
    // What makes a hand-off one this router cannot continue: a staged object under another name
    // (never removed here either), or no first token (the continuation would be refused as the
    // client's error).
    std::string broken;
    if (stage && !stage->held && !is_kv_stage_name(stage->shm_name)) {
      broken = "with its KV under the name " + shown_name(stage->shm_name) +
               ", which is not a staged KV's (\"/headway-kv-...\")";
    } else if (stage && generated_.empty()) {
      broken = "before its first token";
      KvStage unread = *stage;  // nobody will read it: its holder frees it
      unread.source_address = engine_.address();
      owner_.discard_stage(unread);
    }
    const bool continued = stage && broken.empty() && owner_.continue_elsewhere(*this, *stage);
    if (!continued && cancelled_) {
      finish_cancelled();
    } else if (!broken.empty()) {
      finish(Finish::kError, fmt::format("engine{} at {} handed the request off {}",
                                         engine_.index(), engine_.address(), broken));
    } else if (!continued) {
      finish(Finish::kError,
             fmt::format("engine{} at {} prefilled the request, but no decode engine process "
                         "could continue it",
                         engine_.index(), engine_.address()));
    }
  } else if (!response_.finish_reason().empty() && !finished_) {
    Finish reason = finish_of(response_.finish_reason());
    std::string error = response_.error();
    if (reason == Finish::kError) {
      error = fmt::format("engine{} at {}: {}", engine_.index(), engine_.address(),
                          error.empty() ? "failed" : error);
    }
    const AbortCause cause = abort_cause_.load();
    if (reason == Finish::kAbort && cause == AbortCause::kStopString) reason = Finish::kStop;
    if (reason == Finish::kAbort && error.empty()) error = abort_error_text(cause);
    if (reason == Finish::kAbort && cause == AbortCause::kNone) {
      // The engine process aborted it on its own (its drain was cut short: "the server is
      // shutting down"): said as is, that read as this router's shutdown.
      error = fmt::format("engine{} at {}: {}", engine_.index(), engine_.address(),
                          error.empty() ? "aborted there" : error);
    }
    finish(reason, std::move(error), &response_.timings());
  }
  StartRead(&response_);
}

void ProxiedGenerate::OnDone(const grpc::Status& status) {
  if (!finished_) {
    if (cancelled_) {
      // A continuation cancelled before its process answered: its staged KV goes (a second
      // unlink, after the process read or dropped it, is harmless).
      if (!any_response_ && upstream_.has_kv_source()) {
        owner_.discard_stage(grpc_frontend::from_proto(upstream_.kv_source()));
      }
      finish_cancelled();
    } else if (status.ok()) {
      finish(Finish::kError, fmt::format("engine{} at {} ended the stream without a finish reason",
                                         engine_.index(), engine_.address()));
    } else {
      const grpc::StatusCode code = status.error_code();
      const bool unreachable = given_up_ || code == grpc::StatusCode::UNAVAILABLE;
      // A full queue there: another process may have room; this one is not down for it.
      const bool busy = code == grpc::StatusCode::RESOURCE_EXHAUSTED;
      if (unreachable && !given_up_) {
        const std::string why = fmt::format("Generate failed: {}", status.error_message());
        if (engine_.mark_down(why)) {
          spdlog::warn("engine{} at {} is down: {}", engine_.index(), engine_.address(), why);
        }
      }
      if ((unreachable || busy) && !any_response_ && owner_.retry_elsewhere(*this, busy)) {
        owner_.call_done(*this);
        std::shared_ptr<ProxiedGenerate> keep = std::move(self_);  // may delete this on return
        return;
      }
      // A continuation that never started leaves its staged KV to nobody.
      if (!any_response_ && upstream_.has_kv_source()) {
        owner_.discard_stage(grpc_frontend::from_proto(upstream_.kv_source()));
      }
      const std::string why = given_up_ ? "stopped answering: " + engine_.down_reason()
                                        : fmt::format("{} (gRPC status {})", status.error_message(),
                                                      static_cast<int>(code));
      // Only a request of which nothing reached the client is refused; a continuation's client has
      // its first tokens already, so its end is a failure like any other mid-stream.
      const bool nothing_delivered = !any_response_ && generated_.empty();
      if (nothing_delivered && (given_up_ || code == grpc::StatusCode::UNAVAILABLE)) {
        // Nothing ran and no process could take it: the client may try again later (503).
        refuse(ServiceError(ErrorCode::kUnavailable,
                            fmt::format("engine{} at {} could not take the request: {}",
                                        engine_.index(), engine_.address(), why)));
      } else if (nothing_delivered && (busy || code == grpc::StatusCode::INVALID_ARGUMENT ||
                                       code == grpc::StatusCode::NOT_FOUND)) {
        // Refused there (a full queue, a request it finds invalid): the client gets the code the
        // process gave, as from a single process (429, 400, 404), not a failure's 500.
        std::string param;
        const auto& trailing = context_.GetServerTrailingMetadata();
        if (auto it = trailing.find(grpc_frontend::kErrorParamMetadata); it != trailing.end()) {
          param.assign(it->second.data(), it->second.size());
        }
        const ErrorCode refused = grpc_frontend::from_grpc_status(status, "").code();
        refuse(ServiceError(refused,
                            fmt::format("engine{} at {} refused the request: {}", engine_.index(),
                                        engine_.address(), status.error_message()),
                            std::move(param)));
      } else {
        finish(Finish::kError,
               fmt::format("engine{} at {} failed {}: {}", engine_.index(), engine_.address(),
                           any_response_        ? "while streaming"
                           : generated_.empty() ? "before its first token"
                                                : "before it could continue the request",
                           why));
      }
    }
  }
  owner_.call_done(*this);
  std::shared_ptr<ProxiedGenerate> keep = std::move(self_);  // may delete this on return
}

void ProxiedGenerate::refuse(ServiceError refusal) {
  finished_ = true;
  owner_.call_refused(*this, refusal.code());
  Timings timings;
  timings.e2e_seconds = since_arrival();
  stream_->refuse(std::move(refusal), timings);
}

void ProxiedGenerate::finish_cancelled() {
  const AbortCause cause = abort_cause_.load();
  finish(cause == AbortCause::kStopString ? Finish::kStop : Finish::kAbort,
         abort_error_text(cause));
}

void ProxiedGenerate::finish(Finish reason, std::string error, const v1::Timings* upstream) {
  finished_ = true;
  Timings timings;
  if (upstream != nullptr) {
    timings.queue_seconds = upstream->queue_seconds();
    timings.kv_transfer_seconds = upstream->kv_transfer_seconds();
    timings.kv_network_bytes = upstream->kv_network_bytes();
    timings.kv_wait_seconds = upstream->kv_wait_seconds();
    timings.kv_moved = upstream->kv_moved();
    timings.kv_cached_tokens = upstream->kv_cached_tokens();
  }
  timings.ttft_seconds = first_token_seconds_ < 0.0 ? 0.0 : first_token_seconds_;
  timings.e2e_seconds = since_arrival();
  // Continued from a staged KV on this engine process (an engine process from before kv_moved
  // says so by the transfer's seconds only).
  if (timings.kv_moved || timings.kv_transfer_seconds > 0.0) {
    engine_series_.kv_transfers.add();
    engine_series_.kv_cached_tokens.add(static_cast<double>(timings.kv_cached_tokens));
    engine_series_.kv_transfer_seconds.observe(timings.kv_transfer_seconds);
    engine_series_.kv_wait_seconds.observe(timings.kv_wait_seconds);
    engine_series_.kv_network_bytes.add(static_cast<double>(timings.kv_network_bytes));
  }
  series_.finished_with(reason).add();
  series_.e2e_latency->observe(timings.e2e_seconds);
  series_.queue_time->observe(timings.queue_seconds);
  stream_->finish(reason, timings, std::move(error));
}

}  // namespace headway::serving
