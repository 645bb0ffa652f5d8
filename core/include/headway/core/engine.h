// One engine: a model instance, its paged KV cache and one step scheduler, driven one step at a
// time. Each step asks the scheduler for a plan from a read-only snapshot of the queues, validates
// it, executes its preemptions, allocates KV blocks, runs the model on the slices, emits sampled
// tokens, and frees the blocks of requests that finished.
//
// The same code runs on both clocks: with a model that reports step durations the engine owns a
// virtual clock that jumps by each duration; otherwise it reads the wall clock.
//
// Ownership: the engine owns its model, scheduler, clock and request state. RequestRecords and the
// listener are borrowed and must outlive the requests that point at them.
// Threading: all member functions are called from one thread (the engine's loop or the simulator);
// the engine takes no locks, and none is held across a forward pass.
#pragma once

#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/guarded_buffer.h>
#include <headway/core/host_services.h>
#include <headway/core/kv_block_manager.h>
#include <headway/core/kv_event_log.h>
#include <headway/core/log_throttle.h>
#include <headway/core/plan_arrays.h>
#include <headway/core/plan_validator.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/prefix_cache.h>
#include <headway/core/request_record.h>
#include <headway/core/sampler.h>
#include <headway/core/sampling_params.h>
#include <headway/core/token_logprobs.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace headway::core {

struct NewRequest {
  uint64_t id = 0;
  uint32_t class_index = 0;
  uint32_t prompt_tokens = 0;
  std::vector<int32_t> prompt;  // token ids; may stay empty for a model that needs none
  uint32_t max_output_tokens = 1;
  int32_t priority = 0;
  double arrival = 0.0;
  SamplingParams sampling;
  RequestRecord* record = nullptr;  // borrowed; filled as the request progresses
  // Disaggregated serving: stop after the prefill (and its first token) and wait, holding the KV
  // blocks, until the cluster has moved them to a decode engine (see take_prefilled()).
  bool prefill_only = false;
  // Outputs generated elsewhere before this engine took the request (its prompt then holds them):
  // a seeded sampler numbers this engine's outputs from here, so that the tokens are those the
  // request would have had on one engine.
  uint32_t outputs_before = 0;
  // Simulated answers (a workload's output below its max_tokens): the answer ends by itself, as
  // at a stop token, once it has this many outputs on the engines that ran it (a moved request's
  // count includes its prefill engine's first token; outputs_before is not counted, and nothing
  // sets both). 0: only max_output_tokens, max_model_len or a sampled stop token end it.
  uint32_t ends_after_outputs = 0;
};

// A request whose KV is being moved here from another engine (disaggregated serving).
struct IncomingTransfer {
  uint64_t id = 0;
  uint32_t class_index = 0;
  uint32_t prompt_tokens = 0;
  uint32_t output_tokens = 0;    // already generated on the prefill engine (usually 1)
  uint32_t computed_tokens = 0;  // positions whose KV arrives
  uint32_t max_output_tokens = 0;
  int32_t priority = 0;
  double arrival = 0.0;
  SamplingParams sampling;
  std::vector<int32_t> tokens;  // prompt + outputs, when the request has ids
  RequestRecord* record = nullptr;
  uint32_t ends_after_outputs = 0;  // NewRequest::ends_after_outputs
};

// A prefilled request's side of a transfer, on the prefill engine. Valid until release_transferred.
struct OutgoingTransfer {
  IncomingTransfer request;             // what the decode engine needs to continue it
  const std::vector<uint32_t>* blocks;  // its KV blocks here
};

enum class FinishReason { kLength, kStop, kAborted };

// Called on the engine's thread as tokens come out; must not block.
class EngineListener {
 public:
  virtual ~EngineListener() = default;
  // `logprobs`: the token's log-probabilities when the request asked for them (SamplingParams::
  // logprobs), else null; valid for the call only.
  virtual void on_token(uint64_t request_id, int32_t token, double time,
                        const SampledLogprobs* logprobs) = 0;
  virtual void on_finished(uint64_t request_id, FinishReason reason, double time) = 0;
  // The figures of prompt tokens, in position order, for a request that asked for them
  // (SamplingParams::prompt_logprobs): called as the steps that compute its prompt end, before its
  // first token's on_token. Valid for the call only. A request computed again (preempted and
  // recomputed) does not report a position twice on one engine. Listeners that never ask for them
  // need not override this.
  virtual void on_prompt_logprobs(uint64_t request_id,
                                  std::span<const PromptTokenLogprobs> entries) {
    (void)request_id;
    (void)entries;
  }
};

// What a step did, for traces and drivers. Valid until the next step.
struct StepDetail {
  uint64_t step = 0;
  double start = 0.0;
  double duration = 0.0;
  std::vector<hw_slice> slices;
  std::vector<uint8_t> slice_is_decode;
  std::vector<uint8_t> slice_samples;  // 1 where the slice samples a token (its prompt's last
                                       // chunk, or a decode)
  std::vector<uint64_t> preempted;
  uint32_t prefill_tokens = 0;
  uint32_t decode_tokens = 0;
  uint32_t kv_blocks_used = 0;
  // Prefix caching: tokens of the requests this step admitted with a cache lookup, and of those
  // the tokens found cached.
  uint32_t prefix_queried_tokens = 0;
  uint32_t prefix_hit_tokens = 0;
};

// Totals since the engine started.
struct EngineCounters {
  uint64_t steps = 0;
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t finished = 0;
  uint64_t aborted = 0;
  double busy_seconds = 0.0;
  // Prefix caching: tokens of the requests admitted with a cache lookup, and of those, the tokens
  // whose KV was found cached (not computed).
  uint64_t prefix_cache_queried_tokens = 0;
  uint64_t prefix_cache_hit_tokens = 0;
  // Disaggregation: tokens of KV moved here that this engine's prefix cache held already (taken
  // from it, not copied; Engine::reserve_incoming).
  uint64_t moved_kv_cached_tokens = 0;
};

class Engine {
 public:
  // Creates the model and scheduler instances of `config`. Wall-clock engines of one process share
  // `wall_origin` so their times compare.
  Engine(const EngineConfig& config, const DeploymentConfig& deployment,
         std::chrono::steady_clock::time_point wall_origin = std::chrono::steady_clock::now());
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request (WAITING). Throws Error: HW_INVALID_ARGUMENT when it can never run here
  // (longer than max_model_len or than the whole KV cache, or no prompt), HW_RESOURCE_EXHAUSTED
  // when the waiting queue is full, HW_INVALID_ARGUMENT on a duplicate id.
  void add_request(NewRequest request);

  // Aborts a waiting or running request and frees its blocks. Returns false if it is not here.
  bool abort(uint64_t request_id);

  bool has_work() const { return !running_.empty() || waiting_size() > 0; }

  // --- Disaggregation (called by the cluster's driver, on this engine's thread) -------------
  // Moves into `ready` (cleared first) the ids of prefill_only requests whose prefill finished
  // since the last call: they hold their KV blocks in state TRANSFERRING. `finished` gets those
  // that finished outright with their first token (stop token, or one output), which need no move.
  void take_prefilled(std::vector<uint64_t>& ready, std::vector<uint64_t>& finished);
  // Whether a request with these tokens so far could go on decoding here (within max_model_len).
  bool can_continue(uint32_t prompt_tokens, uint32_t output_tokens) const;
  // Whether a request may ask for this many output tokens after its prompt here: prompt + output
  // within max_model_len (add_request refuses it otherwise).
  bool fits(uint32_t prompt_tokens, uint32_t max_output_tokens) const;
  // The request and block list to send; throws Error when `id` is not TRANSFERRING here.
  OutgoingTransfer outgoing(uint64_t id) const;
  // Frees a transferred request's blocks and forgets it (not counted as finished here).
  void release_transferred(uint64_t id);
  // Reserves KV blocks for an incoming request: with moved_kv_blocks "all", for all it will hold
  // here (prompt and every output); with "as_needed", for the KV that arrives and its next token,
  // and only while that leaves a free block for each request holding KV here and no request
  // preempted here is still being recomputed. It waits in TRANSFERRING until complete_transfer().
  // Returns false (and changes nothing) when it cannot have them yet: the transfer waits
  // (backpressure). Throws Error when it can never fit.
  // With reuse_cached (and prefix caching on, and ids), the leading blocks of the arriving KV that
  // this engine's prefix cache holds (a conversation's earlier turns decoded here, a document
  // moved here before) are taken from the cache, shared as a prompt prefilled here shares them:
  // incoming_cached_blocks() says how many, and the transfer copies only the blocks after them.
  // A caller whose transfer cannot skip blocks passes false.
  bool reserve_incoming(IncomingTransfer request, bool reuse_cached = true);
  // The reserved blocks, in order: the first incoming_cached_blocks() hold their KV already.
  const std::vector<uint32_t>& incoming_blocks(uint64_t id) const;
  uint32_t incoming_cached_blocks(uint64_t id) const;
  // The KV arrived: the request joins the head of the waiting queue with its blocks and decodes.
  void complete_transfer(uint64_t id);
  // The KV region of this engine's model, for transports (block_bytes filled in by the engine).
  const hw_memory_desc& kv_memory() const { return kv_memory_; }

  // Runs one step. Returns false when there was nothing to schedule (no time passes then).
  // Throws Error when the scheduler fails or returns an invalid plan (which is not executed), and
  // when it has preempted one request more than livelock_bound() times since a step last sampled
  // a token: it is taken to readmit and preempt for ever (the step itself was executed).
  bool step();
  // 10,000 + max_model_len preemptions of one request without a token sampled on the engine. A
  // scheduler that makes progress samples a token once the request it favours has prefilled;
  // until then each of that prefill's steps (at most max_model_len, one token each) may readmit
  // and preempt another request once, and the 10,000 leave room to spare.
  uint64_t livelock_bound() const { return 10000 + uint64_t{max_model_len_}; }

  hw_engine_load load() const;
  const StepDetail& last_step() const { return detail_; }
  const EngineCounters& counters() const { return counters_; }
  const KvBlockManager& kv() const { return kv_; }
  const hw_model_info& model_info() const { return model_->info(); }
  const std::string& model_name() const { return model_->name(); }
  const hw_scheduler_limits& scheduler_limits() const { return scheduler_->limits(); }
  // Whether this engine reuses cached prefixes (its config asks; only requests with token ids
  // take part).
  bool prefix_caching() const { return config_.prefix_caching; }
  // Keeps a log of the route pieces its prefix cache stores and evicts (KvEventLog; hw_kv_event),
  // for a router that reads them: call before the first request; nothing where prefix caching is
  // off (the engine holds no beginning, and never says it does).
  void keep_kv_events();
  // Appends the events logged since the last call to `out` (KvEventLog::move_into); none when no
  // log is kept.
  void take_kv_events(std::vector<hw_kv_event>& out) {
    if (kv_events_ != nullptr) kv_events_->move_into(out);
  }
  bool keeps_kv_events() const { return kv_events_ != nullptr; }
  Clock& clock() { return *clock_; }
  // The host services of the model and of the scheduler instance (their counters and gauges).
  HostServices& model_host() { return model_host_; }
  HostServices& scheduler_host() { return scheduler_host_; }
  const std::string& scheduler_name() const { return scheduler_->name(); }
  const EngineConfig& config() const { return config_; }
  uint32_t max_model_len() const { return max_model_len_; }
  size_t running_size() const { return running_.size(); }
  size_t waiting_size() const { return waiting_.size() - waiting_head_; }

  void set_listener(EngineListener* listener) { listener_ = listener; }

 private:
  struct Request {
    uint64_t id = 0;
    uint32_t class_index = 0;
    int32_t priority = 0;
    int32_t state = HW_REQUEST_WAITING;
    uint32_t prompt_tokens = 0;
    uint32_t output_tokens = 0;
    uint32_t computed_tokens = 0;
    uint32_t max_output_tokens = 0;
    double arrival = 0.0;
    uint64_t admission_order = 0;
    uint32_t preemptions = 0;
    // Its preemptions since a step last sampled a token on this engine: valid while
    // token_step_seen equals the engine's tokens_sampled_steps_ (livelock_bound()).
    uint64_t preemptions_without_token = 0;
    uint64_t token_step_seen = 0;
    SamplingParams sampling;
    std::vector<int32_t> tokens;  // prompt then outputs (only when the request has ids)
    std::vector<uint32_t> blocks;
    RequestRecord* record = nullptr;
    bool in_use = false;
    bool prefill_only = false;
    bool catching_up = false;  // preempted, and not yet sampling again; counted in catching_up_
    uint32_t ends_after_outputs = 0;  // NewRequest::ends_after_outputs
    uint32_t outputs_before = 0;      // NewRequest::outputs_before: added to the sampling index
    // With SamplingParams::prompt_logprobs: the next prompt position whose figures are to be
    // reported (from 1; the prompt's length once all were).
    uint32_t prompt_logprobs_next = 0;
    // Prompt tokens proper: prompt_tokens less the outputs an earlier engine generated.
    uint32_t own_prompt() const { return prompt_tokens - outputs_before; }
    // Whether prompt positions' figures are still to be reported.
    bool reports_prompt() const {
      return sampling.prompt_logprobs >= 0 && prompt_logprobs_next < own_prompt();
    }
    // Whether a slice from `start` over `tokens` positions holds a position whose figures are
    // still to be reported (position p's come from the row of p - 1).
    bool reports_prompt_in(uint32_t start, uint32_t tokens) const {
      return reports_prompt() && start + tokens >= prompt_logprobs_next && start + 1 < own_prompt();
    }
    // Prefix caching. While waiting: the cached blocks that hold its first tokens, each as it was
    // when found (its view shows them as computed); kept from step to step while their
    // generations hold. While holding KV: how many of its leading blocks are recorded in the
    // cache, the chain to record the next one after, and whether that chain was evicted
    // meanwhile (nothing more of it is recorded then).
    std::vector<PrefixCache::Link> cached_prefix;
    uint64_t matched_at_evictions = 0;  // KvBlockManager::evictions() when it was last checked
    uint32_t recorded_blocks = 0;
    PrefixCache::Link chain;
    bool chain_lost = false;
    // Moved here: its leading blocks taken from the prefix cache, which no transfer writes.
    uint32_t arrived_cached_blocks = 0;
    void forget_chain() {
      cached_prefix.clear();
      matched_at_evictions = 0;
      recorded_blocks = 0;
      chain = PrefixCache::kStart;
      chain_lost = false;
    }
    uint32_t total() const { return prompt_tokens + output_tokens; }
  };

  hw_request_view view_of(const Request& r) const;
  uint32_t requests_holding_kv() const;
  // Of the request's blocks, those another request holds too.
  uint32_t shared_blocks(const Request& r) const;
  // Takes a free slot (or a new one) for a request in `state`; fills and indexes it.
  uint32_t occupy_slot(IncomingTransfer in, int32_t state);
  uint32_t slot_of(uint64_t id) const;
  // The error step() throws past livelock_bound(), naming the request.
  Error livelock() const;
  void push_waiting_front(const Request& r);
  // Queues a preempted request after the requests at the head that hold moved KV.
  void push_waiting_after_moved(const Request& r);
  // Takes the `admitted` requests a step admitted out of the waiting queue.
  void remove_admitted_from_waiting(size_t admitted);
  void preempt(uint32_t slot);
  void finish(uint32_t slot, FinishReason reason, double time);
  void release_slot(uint32_t slot);
  bool is_stop_token(const Request& r, int32_t token, uint32_t eos) const;
  // Makes the prefix cache's index; throws Error when its memory cannot be had.
  void start_prefix_cache();
  // Prefix caching: finds, for the waiting requests a scheduler is likely to admit next that hold
  // no KV (the head of the queue and, when priorities differ, the most urgent), the cached blocks
  // that hold their first tokens (without sharing, only idle ones, each to the first matched).
  void match_cached_prefixes();
  // Matches one waiting entry's request (match_cached_prefixes' loop body).
  template <class CanTake>
  void match_waiting_entry(hw_request_view& view, uint64_t round, const CanTake& can_take);
  // Whether waiting_[a] comes before waiting_[b] in a priority policy's order: the lower priority
  // value, then the earlier place in the queue.
  bool waits_more_urgently(size_t a, size_t b) const;
  // Counts a request into (+1) or out of (-1) the waiting queue's priorities.
  void count_waiting_priority(int32_t priority, int delta);
  // Puts into prefix_scan_ the indices of the waiting entries from index `from` on that hold no
  // KV, first the `count` most urgent (lowest priority value, then queue order) of those with a
  // priority value below `less_urgent`, in no order; returns how many it chose.
  size_t order_waiting_by_urgency(size_t from, int32_t less_urgent, size_t count);
  // Gives an admitted request the blocks matched for it, which it then need not compute.
  void take_cached_prefix(Request& r);
  // Finds into arriving_prefix_ the cached blocks that hold the first whole blocks of an incoming
  // request's KV (without sharing, only idle ones); returns how many of them a request holds.
  uint32_t match_arriving_prefix(const IncomingTransfer& in);
  // The one walk of the prefix cache along a request's ids: appends to `run` the cached blocks that
  // hold `tokens`' whole blocks from run.size() up to `most`, continuing the chain `run` ends in,
  // while `take(block)` accepts each (it may note the claim). Defined in engine.cpp, its one user.
  template <class Take>
  void extend_cached_run(std::span<const int32_t> tokens, uint32_t most,
                         std::vector<PrefixCache::Link>& run, Take take);
  // Records the request's blocks that its computed tokens filled since the last call.
  void record_full_blocks(Request& r);
  // Reads the figures of the prompt positions the slice reports (its rows start at `first_row` of
  // logits_) into prompt_figures_, their top tokens into prompt_top_ from `top_used` on (which it
  // advances); moves the request's prompt_logprobs_next past them.
  void read_prompt_figures(Request& r, const hw_model_slice& slice, uint32_t first_row,
                           size_t& top_used);
  // Logs (throttled) rows the sampler found without a finite best logit since the last warning.
  void warn_of_rows_without_finite_logits();
  // Throws when the model cannot honour the request's logits processing (SamplingParams).
  void check_sampling(const std::string& who, const SamplingParams& sampling) const;

  EngineConfig config_;
  std::unique_ptr<Clock> clock_;
  // One per plugin instance: their log lines and metrics name them.
  HostServices model_host_;
  HostServices scheduler_host_;
  std::unique_ptr<ModelInstance> model_;
  std::unique_ptr<SchedulerInstance> scheduler_;
  KvBlockManager kv_;
  // Null while no request with token ids came, and when prefix caching is off.
  std::unique_ptr<PrefixCache> prefix_cache_;
  std::unique_ptr<KvEventLog> kv_events_;  // keep_kv_events(); the prefix cache reports to it
  // Whether running requests may share cached blocks: the scheduler knows that preempting one
  // frees only what it holds alone (hw_request_view.blocks_shared, ABI 1.3). Otherwise a cached
  // block is reused only while no request holds it.
  bool share_cached_blocks_ = false;
  std::vector<uint64_t> claimed_in_round_;  // per block: the match round that last claimed it
  std::vector<PrefixCache::Link> arriving_prefix_;  // match_arriving_prefix's; scratch
  uint64_t match_round_ = 0;
  // Waiting requests pushed to the front of the queue since the last match: how far past the scan
  // an entry matched then may have moved.
  size_t pushed_front_since_match_ = 0;
  // Waiting requests per priority value, and how many values have any. While all wait at one
  // priority a priority policy's choice follows queue order and the match scans the head;
  // otherwise as many of the most urgent behind it too (a priority policy admits them first, from
  // anywhere in the queue). Grows with the values clients use, not per step.
  std::vector<std::pair<int32_t, uint32_t>> waiting_priorities_;
  size_t waiting_priorities_in_use_ = 0;
  // Whether the last match went by urgency: entries anywhere in the queue may hold a match.
  bool matched_by_urgency_ = false;
  std::vector<size_t> prefix_scan_;  // match_cached_prefixes' entries to match by urgency; scratch
  static constexpr size_t kMinPrefixScan = 64;
  PlanValidator validator_;
  uint32_t max_model_len_ = 0;
  bool model_needs_ids_ = false;
  EngineListener* listener_ = nullptr;

  std::vector<Request> requests_;
  std::vector<uint32_t> free_slots_;
  std::unordered_map<uint64_t, uint32_t> id_to_slot_;
  std::vector<uint32_t> running_;         // slots, admission order
  std::vector<hw_request_view> waiting_;  // queue order from waiting_head_
  size_t waiting_head_ = 0;
  uint64_t waiting_prompt_tokens_ = 0;  // tokens the waiting requests still have to compute
  uint64_t waiting_output_tokens_ = 0;  // tokens the waiting requests still have to generate
  // Requests preempted here that have not yet recomputed what they lost (sampled again): with
  // moved_kv_blocks "as_needed" no moved KV comes in meanwhile, or arrivals could take the blocks
  // their recomputes need and starve them.
  uint32_t catching_up_ = 0;
  // Steps that sampled a token so far. A scheduler that preempts and readmits a request without
  // any request ever reaching a token (a livelock) takes steps, so the simulator's and the serving
  // loop's "planned nothing" check never sees it: once a request has been preempted more than
  // livelock_bound() times since a step last sampled a token, the step throws. Counted per
  // request, not per engine: one step may preempt thousands of requests once each and still make
  // progress (helper-188).
  uint64_t tokens_sampled_steps_ = 0;
  // The first request found past the bound (livelocked_count_ > 0), and its count then.
  uint64_t livelocked_id_ = 0;
  uint64_t livelocked_count_ = 0;
  uint64_t next_admission_ = 0;
  uint64_t step_index_ = 0;

  // Per-step buffers, reused so that a step does not allocate in steady state.
  std::vector<hw_request_view> running_views_;
  // What the scheduler and the model fill, each with a guard past its capacity.
  PlanArrays plan_arrays_;
  std::vector<hw_model_slice> model_slices_;
  std::vector<uint32_t> slice_slots_;
  GuardedBuffer<int32_t> sampled_;
  // Per slice: 1 where the host samples it from a logits row (every sampling slice of a model that
  // returns logits; those of requests that use host processing on a model that returns logits on
  // request, for which it is hw_model_batch.logits_wanted).
  std::vector<uint8_t> host_samples_;
  // The rows the model wrote: one per slice the host samples, and one per position of a slice
  // that reports prompt figures (hw_model_slice.all_logits).
  std::vector<float> logits_;
  Sampler sampler_;
  uint64_t rows_without_finite_warned_ = 0;  // sampler_'s count at the last warning
  // The first, then at most one line a minute: a broken model gives such rows every step.
  LogThrottle finite_warnings_{std::chrono::minutes(1)};
  // Log-probabilities of this step's sampling slices that asked for them: slice_logprobs_[i]
  // for model_slices_[i], its top tokens at logprob_top_[top_begin, top_begin + top_count).
  struct SliceLogprobs {
    float logprob = 0.0f;
    uint32_t top_begin = 0;
    uint32_t top_count = 0;
  };
  LogprobCalculator logprob_calculator_;
  std::vector<float> raw_logits_;  // a row as the model wrote it, before the sampler changes it
  std::vector<SliceLogprobs> slice_logprobs_;
  std::vector<TokenLogprob> logprob_top_;
  // The step's prompt-token figures (SamplingParams::prompt_logprobs), for slices whose rows
  // hold all their positions: slice i's at prompt_figures_[prompt_begin_[i], prompt_begin_[i + 1])
  // and their top tokens in prompt_top_.
  std::vector<PromptTokenLogprobs> prompt_figures_;
  std::vector<uint32_t> prompt_begin_;
  std::vector<TokenLogprob> prompt_top_;
  std::vector<uint64_t> prefilled_;              // prefill_only requests ready to move
  std::vector<uint64_t> prefill_only_finished_;  // prefill_only requests done with no move
  hw_memory_desc kv_memory_{};
  StepDetail detail_;
  EngineCounters counters_;
};

}  // namespace headway::core
