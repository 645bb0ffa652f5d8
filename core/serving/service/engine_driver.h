// The thread that drives one engine of an in-process cluster: it owns every call into its Engine,
// applies what frontend threads put in its inbox (new requests, aborts) between steps, steps the
// engine with no lock held, turns the engine's callbacks into RequestStream pushes and metrics,
// publishes the engine's load for the router, and sleeps on a condition variable when idle.
//
// Ownership: the driver borrows the engine (owned by the cluster) and the sink; it owns the
// requests it serves (InFlightRequest) from the moment they are enqueued until they finish.
// Threading: enqueue_*(), load(), alive() and stop() are safe from any thread; everything else runs
// on the driver's own thread.
#pragma once

#include <headway/core/engine.h>
#include <headway/core/step_trace.h>
#include <headway/serving/metrics_serving.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "expected_handoffs.h"
#include "in_flight_request.h"
#include "kv_handoff.h"
#include "kv_links.h"
#include "kv_stage_file.h"

namespace headway::serving {

// Where a driver reports requests that left its engine, after it published its load.
class FinishedSink {
 public:
  virtual ~FinishedSink() = default;
  // Called on the driver's thread, with no driver lock held. `numeric_ids`: the engine's ids
  // (InFlightRequest::numeric_id), which stay unique while a client's id may be reused once its
  // request was aborted.
  virtual void forget(std::span<const uint64_t> numeric_ids) = 0;
};

class EngineDriver final : private core::EngineListener {
 public:
  // `handoff`: how prefilled requests move between the drivers of a disaggregated deployment;
  // null when the deployment has no KV transport. `step_trace`: where each step run is written
  // (shared with the other drivers); null for none.
  EngineDriver(core::Engine& engine, EngineSeries metrics, FinishedSink& sink,
               KvHandoff* handoff = nullptr,
               std::shared_ptr<core::StepTraceWriter> step_trace = nullptr);
  ~EngineDriver() override;  // stops and joins (see stop())
  EngineDriver(const EngineDriver&) = delete;
  EngineDriver& operator=(const EngineDriver&) = delete;

  void start();

  // Queues a request; it is added to the engine on the driver's thread. Never throws for the
  // engine's reasons: a request the engine refuses finishes with Finish::kError on its stream.
  void enqueue_submit(core::NewRequest request, std::unique_ptr<InFlightRequest> state);
  // Queues an abort for `cause` (abort_cause.h). An id this driver does not hold is ignored, or
  // forwarded to the decode engine it was handed to.
  void enqueue_abort(uint64_t id, AbortCause cause);

  // --- Disaggregation: called by the other drivers (see kv_handoff.h) ---
  // A request prefilled on another engine, to continue here once its KV arrived.
  void enqueue_incoming(Handoff handoff);
  // The decode engine has its own copy of request `id`'s KV (or gave up on it): free ours.
  void enqueue_release(uint64_t id);

  // The engine's load as last published, counting the requests still in the inbox and those
  // headed here from another engine's prefill (expected_handoffs()).
  hw_engine_load load() const;
  // Appends to `out` what the engine's prefix cache stored and evicted up to its last published
  // step and not taken yet (Engine::keep_kv_events; nothing where it keeps none), for the router.
  void take_kv_events(std::vector<hw_kv_event>& out);
  // Where a request routed here for its decode is counted until its hand-off arrives.
  const std::shared_ptr<ExpectedHandoffs>& expected_handoffs() const { return expected_; }
  // Requests in the inbox (submits and hand-offs) or waiting here (in the engine's queue, or for
  // room or their KV copy): what max_waiting bounds.
  uint32_t waiting_including_inbox() const;
  bool alive() const;
  // How long the engine's step now running has run (0 between steps): a model or scheduler call
  // that does not return shows here, and in /health past kStuckStepSeconds.
  double step_seconds() const;

  // Aborts everything in flight (streams finish kAbort), then the thread exits. Idempotent.
  void stop();

 private:
  struct Command {
    enum class Kind { kSubmit, kAbort, kIncoming, kRelease } kind = Kind::kSubmit;
    uint64_t id = 0;
    AbortCause abort_cause = AbortCause::kNone;
    core::NewRequest request;
    std::unique_ptr<InFlightRequest> state;
    Handoff handoff;
  };
  // A request whose KV the transport is copying here.
  struct Arriving {
    uint64_t id = 0;
    Handoff handoff;
    std::vector<uint32_t> blocks;  // reserved here; the transport writes them
    // Staged by another process: its bytes, which the transport reads (handoff.source_kv).
    std::unique_ptr<KvStageReader> stage_bytes;
    // Held by another process: pulled over a peer link (kv_links.h); `transfer` unused.
    std::shared_ptr<KvPull> pull;
    uint64_t transfer = 0;
    // Every block it brings was in this engine's prefix cache: no transfer, done at once.
    bool nothing_to_copy = false;
    bool aborted = false;  // why: handoff.state->abort_cause
    // When it was set up here, and whether a warning already said it has not ended since.
    std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
    bool overdue_warned = false;
  };
  // Across processes: a prefill_only request whose KV the transport is copying into a stage.
  struct Staging {
    uint64_t id = 0;
    std::unique_ptr<InFlightRequest> state;
    std::unique_ptr<KvStageWriter> writer;  // the stage; removed unless committed
    std::vector<uint32_t> source_blocks;    // this engine's, held until the copy is over
    std::vector<uint32_t> stage_blocks;     // 0 .. n-1
    uint32_t computed_tokens = 0;
    uint64_t transfer = 0;
    bool aborted = false;
  };

  void run();
  void push(Command command);
  void apply(Command& command);
  void apply_abort(const Command& command);
  void apply_incoming(Handoff handoff);
  // Source side: hands the requests whose prefill finished to their decode engines' drivers.
  void hand_off_prefilled();
  // Destination side: reserves room for the requests waiting to arrive and starts their copies.
  void start_arrivals();
  // Destination side: continues (or ends) the requests whose copy finished.
  void finish_arrivals();
  // Warns once when an arriving transfer has not ended after kOverdueTransferSeconds.
  void warn_if_overdue(Arriving& arriving, int32_t state);
  static constexpr double kOverdueTransferSeconds = 30.0;
  // Across processes: stages a prefill_only request's KV in shared memory and ends it kHandoff
  // (through the KV transport when the process has one: finish_staging() ends it).
  void stage_out(uint64_t id);
  // Ends the requests whose copy into a stage finished (kHandoff, or kError when it failed).
  void finish_staging();
  void end_staging(Staging& staging, int32_t transfer_state);
  // Across processes: continues a request from its staged KV, or prefills it here when the stage
  // cannot be used. Returns false (and changes nothing) while there is no room for its blocks.
  bool arrive_from_stage(Handoff& handoff);
  // A finished KV copy into this engine (request `id`, its blocks reserved here): the request's
  // timings get the copy's seconds (and, for a stage fetched from another host, the fetch and its
  // bytes; stage is null for a transport's copy), and the engine's series the blocks its prefix
  // cache held (incoming_cached_blocks), which no copy wrote.
  void record_arrival(InFlightRequest& state, uint64_t id, const KvStage* stage,
                      double copy_seconds);
  // Why this engine cannot decode on `stage` (another model's KV, another block layout, the
  // object gone, ...); empty when it can.
  std::string stage_problem(const KvStage& stage) const;
  // A staged KV that cannot be used (`problem`): the stage goes, the request is prefilled here.
  void prefill_instead_of_stage(Handoff& handoff, const std::string& problem);
  // Polls a transfer until it is over (shutting down: its block lists are about to go).
  void wait_for_transfer(uint64_t handle);
  // An arrival's copy so far (a pull still being requested is pending, a declined one failed).
  core::KvTransportInstance::Progress progress_of(const Arriving& arriving);
  // Waits until nothing writes the arrival's blocks any more (shutting down).
  void wait_for_arrival(Arriving& arriving);
  // Nobody here will read another process's staged or held KV: remove the object, or tell the
  // holder to free it.
  void let_go_of_stage(const KvStage& stage);
  // kv_handoff = "link", source side: frees the blocks of held KV that was sent or expired.
  void collect_held();
  // A request whose KV could not be moved here: its prompt and the tokens generated so far become
  // this engine's prompt, and it generates the rest.
  void prefill_here(Handoff& handoff);
  // `held_kv_sent`: a held KV's holder sent it (and frees it itself); otherwise it is told to.
  void release_source(const Handoff& handoff, uint64_t id, bool held_kv_sent = false);
  // Ends a request that will not arrive here after all; its source frees its KV (or its staged
  // KV is removed).
  void drop_incoming(Handoff& handoff, Finish reason, double time, std::string error);
  void step_once();
  void publish();
  // Runs write() (a line of the step trace) unless tracing stopped; a failed write is logged and
  // stops the trace of this engine (the writer stays quiet for the others).
  template <class WriteTrace>
  void trace(WriteTrace&& write);
  void fail(const std::string& why);
  void end_request(InFlightRequest& request, Finish reason, double time, std::string error,
                   std::optional<KvStage> kv_stage = std::nullopt);

  // EngineListener, on the driver's thread.
  void on_token(uint64_t request_id, int32_t token, double time,
                const core::SampledLogprobs* logprobs) override;
  void on_prompt_logprobs(uint64_t request_id,
                          std::span<const core::PromptTokenLogprobs> entries) override;
  void on_finished(uint64_t request_id, core::FinishReason reason, double time) override;

  core::Engine& engine_;
  EngineSeries metrics_;
  FinishedSink& sink_;
  KvHandoff* const handoff_;
  std::shared_ptr<core::StepTraceWriter> step_trace_;  // null once a write failed
  std::thread thread_;

  // When the step now running began (steady clock, ns since its epoch); 0 between steps.
  std::atomic<int64_t> step_began_ns_{0};
  mutable std::mutex mutex_;  // guards the members up to `thread state`
  std::condition_variable wake_;
  std::vector<Command> inbox_;
  bool stopping_ = false;
  bool exited_ = false;  // the thread ended: nothing in the inbox will be applied any more
  bool alive_ = true;
  hw_engine_load published_{};
  // The engine's KV events published and not yet taken (null where it keeps none): bounded, so
  // that a server nobody routes to for a while keeps a marker instead of every event.
  std::unique_ptr<core::KvEventLog> published_events_;
  uint32_t inbox_submits_ = 0;        // submits queued and not yet published as applied
  uint64_t inbox_prompt_tokens_ = 0;  // their prompt tokens
  uint64_t inbox_output_tokens_ = 0;  // their max output tokens
  // Hand-offs (requests another engine or process prefilled) queued and not yet published as
  // applied, and the tokens they have left to generate. Once applied they wait in incoming_ /
  // arriving_, which publish() counts: until their KV is in, the engine's own load lacks them.
  uint32_t inbox_handoffs_ = 0;
  uint64_t inbox_handoff_tokens_ = 0;
  // Not under mutex_ (atomic): requests headed here, counted until their hand-off is queued.
  const std::shared_ptr<ExpectedHandoffs> expected_ = std::make_shared<ExpectedHandoffs>();

  // --- thread state: the driver thread only ---
  std::vector<Command> applying_;         // swapped with inbox_: both keep their capacity
  std::vector<hw_kv_event> step_events_;  // publish()'s scratch, reserved: no allocation
  std::unordered_map<uint64_t, std::unique_ptr<InFlightRequest>> requests_;
  std::vector<uint64_t> finished_ids_;  // numeric ids
  // Finishes ended this iteration, delivered to their streams only after publish() forgot their
  // ids: a client that sees its stream end can reuse the request id at once, and the load it reads
  // then already reflects the finish.
  struct PendingFinish {
    std::shared_ptr<RequestStream> stream;
    Finish reason = Finish::kNone;
    Timings timings;
    std::string error;
    std::optional<KvStage> kv_stage;
  };
  std::vector<PendingFinish> finishing_;
  uint32_t applied_submits_ = 0;  // taken from the inbox since the last publish
  uint64_t applied_prompt_tokens_ = 0;
  uint64_t applied_output_tokens_ = 0;
  uint32_t applied_handoffs_ = 0;
  uint64_t applied_handoff_tokens_ = 0;
  bool runnable_ = false;  // the last step ran: step again without waiting
  bool engine_ok_ = true;
  bool shutting_down_ = false;  // stop() was applied: every abort from now on is the shutdown's
  // Disaggregation, source side: requests handed to a decode engine whose KV is still ours.
  std::unordered_map<uint64_t, uint32_t> handed_off_;  // id -> decode engine
  std::vector<uint64_t> prefilled_scratch_;
  std::vector<uint64_t> prefill_finished_scratch_;
  // Destination side: requests waiting for KV room (FIFO: backpressure), and copies in flight.
  std::deque<Handoff> incoming_;
  std::vector<Arriving> arriving_;
  // Source side across processes: copies into stages in flight (through the KV transport).
  std::vector<Staging> staging_;
  // kv_handoff = "link": requests whose KV this engine holds for a peer link (HeldKv's count).
  size_t holding_ = 0;
  std::vector<uint64_t> held_released_scratch_;
};

}  // namespace headway::serving
