// One request the router process forwards to an engine process: a server-streaming Generate call
// (gRPC callback API, no thread of its own) whose messages become pushes to the client's
// RequestStream, with the router-side latency metrics recorded as they arrive.
//
// The prompt goes upstream as token ids (the router tokenized it to route it); stop strings stay
// in the router, where the stream's decoder matches them and cancels the call.
//
// Lifetime: created by the service as a shared_ptr, it keeps itself alive from start() until
// OnDone(), where it finishes the stream (if the engine did not), tells its owner, and releases
// itself. Threading: start() and cancel() from any thread; the reactions run on gRPC's threads,
// one at a time for a call.
#pragma once

#include <grpcpp/grpcpp.h>
#include <headway/serving/metrics_serving.h>
#include <headway/serving/request_stream.h>
#include <headway/v1/headway.grpc.pb.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "abort_cause.h"
#include "engine_process.h"
#include "expected_handoffs.h"

namespace headway::serving {

class ProxiedGenerate;

// Told when a forwarded call ended (on a gRPC thread).
class ProxiedCallOwner {
 public:
  virtual ~ProxiedCallOwner() = default;
  // The engine process was unreachable (or, `busy`, refused for a full queue) before it sent
  // anything for `failed`: returns true when another call (to another process) took over its
  // stream, which `failed` then leaves unfinished.
  virtual bool retry_elsewhere(ProxiedGenerate& failed, bool busy) = 0;
  // A prefill_only call finished "handoff": its KV waits in `stage` for its decode process.
  // Returns true when a call to that process took over the stream.
  virtual bool continue_elsewhere(ProxiedGenerate& prefilled, const KvStage& stage) = 0;
  // `call` was refused by its engine process before its first token (or none could be reached):
  // counted as a rejection of the router's, as a refusal at submit would be.
  virtual void call_refused(const ProxiedGenerate& call, ErrorCode code) = 0;
  // Nobody will read `stage` any more (its continuation was cancelled, or failed before its
  // decode process answered): its shared-memory object goes, or the process holding it in its
  // engine (`held`, at stage.source_address) frees the blocks.
  virtual void discard_stage(const KvStage& stage) = 0;
  // After the stream finished, or another call took it over.
  virtual void call_done(const ProxiedGenerate& call) = 0;
};

class ProxiedGenerate final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  static constexpr uint32_t kNoEngine = UINT32_MAX;

  // `engine_series`: where KV transfers into `engine` are counted (owned by the service).
  // `decode_engine`: for a prefill_only call, the engine process that continues the request.
  ProxiedGenerate(ProxiedCallOwner& owner, EngineProcess& engine, EngineSeries& engine_series,
                  RequestSeries series, std::shared_ptr<RequestStream> stream,
                  v1::GenerateRequest upstream, std::chrono::steady_clock::time_point arrival,
                  uint32_t decode_engine = kNoEngine);
  // The call that continues `prefilled` (on its decode process): the stream's token timings go on
  // from where the prefill call left them.
  void continues(const ProxiedGenerate& prefilled);

  // Sends the call; `self` is this call (kept alive until OnDone).
  void start(std::shared_ptr<ProxiedGenerate> self);
  // Cancels the call upstream (the engine process aborts the request and frees its KV) for
  // `cause`: the stream finishes kStop for a stop string, else kAbort (abort_cause.h). A
  // prefill_only call whose first token came is not cut (but for a shutdown): its hand-off is read,
  // and the KV it names let go of.
  void cancel(AbortCause cause);
  // The first half of cancel(), without the upstream call: an owner that takes the call out of its
  // books under its lock marks it there, so that a hand-off it refuses meanwhile (the prefill
  // finished before cancel()) ends as this cancel, not as a failed hand-off.
  void mark_cancelled(AbortCause cause);
  // Gives up on the call because its engine process stopped answering (polls failed): the stream
  // finishes with an error naming the process, or goes to another process if nothing was sent.
  void give_up();

  const std::string& id() const { return stream_->id(); }
  const v1::GenerateRequest& upstream() const { return upstream_; }
  std::chrono::steady_clock::time_point arrival() const { return arrival_; }
  bool cancelled() const { return cancelled_; }
  const std::shared_ptr<RequestStream>& stream() const { return stream_; }
  uint32_t engine_index() const { return engine_.index(); }
  const std::string& engine_address() const { return engine_.address(); }
  uint32_t decode_engine() const { return decode_engine_; }
  // Token ids streamed so far (reactions only, or after OnDone).
  const std::vector<int32_t>& generated() const { return generated_; }
  // Processes this request was sent to so far, this one included (retries add one each).
  uint32_t attempts() const { return attempts_; }
  void set_attempts(uint32_t attempts) { attempts_ = attempts; }
  // The client set no max_tokens (chat): the upstream's max_tokens ends the context of the
  // processes it was sent to, and a retry elsewhere sets it again for where it goes.
  bool open_ended() const { return open_ended_; }
  void set_open_ended(bool open_ended) { open_ended_ = open_ended; }
  // A prefill_only call: counts the request in its decode process's load until it is continued
  // there or ends (ExpectedHandoff).
  void expect_at_decode(const EngineProcess& decode) {
    expected_at_decode_ =
        ExpectedHandoff(decode.expected_handoffs(), upstream_.sampling().max_tokens());
  }

  // The engine process accepted the request (kAcceptedMetadata): the stream is admitted.
  void OnReadInitialMetadataDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  double since_arrival() const;
  // `upstream`: the engine process's timings (its finishing message), null when it sent none.
  void finish(Finish reason, std::string error, const v1::Timings* upstream = nullptr);
  // Cancelled before the engine process said how the request ended: kStop or kAbort by the cause.
  void finish_cancelled();
  // The engine process took the request (its accepted metadata, or failing that its first
  // answer): the client's stream is admitted, and the prompt counts in prompt_tokens_total, once,
  // so that one aborted before its first token counts as in one process.
  void accepted();
  // Ends the stream as refused (RequestStream::refuse) with `refusal`.
  void refuse(ServiceError refusal);

  ProxiedCallOwner& owner_;
  EngineProcess& engine_;
  EngineSeries& engine_series_;
  RequestSeries series_;
  const uint32_t decode_engine_;
  std::shared_ptr<RequestStream> stream_;
  v1::GenerateRequest upstream_;
  const std::chrono::steady_clock::time_point arrival_;
  grpc::ClientContext context_;
  v1::GenerateResponse response_;
  std::shared_ptr<ProxiedGenerate> self_;

  std::atomic<bool> cancelled_{false};
  std::atomic<bool> given_up_{false};
  std::atomic<AbortCause> abort_cause_{AbortCause::kNone};  // see combined()
  // Set by accepted(), which both the initial-metadata and the read reaction may run.
  std::atomic<bool> counted_prompt_{false};
  // A prefill_only call's first token has come: its prefill is done and its hand-off follows
  // (set by the read reaction before the token reaches the stream, read by cancel()).
  std::atomic<bool> handing_off_{false};
  ExpectedHandoff expected_at_decode_;  // settled by the hand-off's reaction, else when destroyed
  // Reaction state (one reaction at a time).
  bool finished_ = false;
  bool any_response_ = false;
  double first_token_seconds_ = -1.0;
  double last_token_seconds_ = 0.0;
  std::vector<int32_t> generated_;
  uint32_t attempts_ = 1;
  bool open_ended_ = false;  // set before start(), read by the service under its lock
  // The log-probabilities of the message being read, as the stream takes them (logprobs_of).
  std::vector<core::SampledLogprobs> logprobs_;
  std::vector<core::TokenLogprob> logprob_top_;

  // One entry per token of `response`, or none when it carries none (or not one per token: the
  // read then ends the request, when it asked for them).
  std::span<const core::SampledLogprobs> logprobs_of(const v1::GenerateResponse& response);
  bool prompt_figures_seen_ = false;  // a message of this call carried prompt figures
  // Hands the message's prompt figures to the stream.
  void push_prompt_logprobs(const v1::GenerateResponse& response);
  std::vector<core::PromptTokenLogprobs> prompt_figures_;
  std::vector<core::TokenLogprob> prompt_top_;
};

}  // namespace headway::serving
