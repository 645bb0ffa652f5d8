#include <fmt/format.h>
#include <headway/core/cluster.h>
#include <headway/core/error.h>
#include <headway/core/route_prefix.h>
#include <headway/core/tokenizer.h>
#include <headway/serving/echoed_input.h>
#include <headway/serving/local_generation_service.h>
#include <headway/serving/metrics_serving.h>
#include <headway/serving/random_bits.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine_driver.h"
#include "held_kv.h"
#include "kv_event_feed.h"
#include "kv_handoff.h"
#include "kv_links.h"
#include "kv_stage_file.h"
#include "kv_stage_janitor.h"
#include "request_admission.h"
#include "request_validation.h"
#include "router_watch.h"

namespace headway::serving {
namespace {

// How long a draining engine process that accepts hand-offs keeps taking continuations even when
// it has nothing in flight: a router's next poll (every 50 ms by default) sees it draining, and a
// prefill finishing meanwhile has its continuation sent here before that.
constexpr std::chrono::seconds kContinuationGrace{1};

}  // namespace

class LocalGenerationService::Impl final : public FinishedSink {
 public:
  // Lets a stream's stop-string callback reach the service only while the service lives: a
  // frontend may hold a stream (and read its last chunk) after the service is gone.
  struct Link {
    std::mutex mutex;
    Impl* service = nullptr;
  };

  Impl(const core::DeploymentConfig& deployment, LocalServiceOptions options);
  ~Impl() override;

  std::shared_ptr<RequestStream> submit(GenerateInput input);
  // `numeric_id`: 0 for any request with this client id, else only that one (see submit()).
  bool abort(const std::string& request_id, AbortCause cause, uint64_t numeric_id = 0);
  bool abort(const RequestStream& stream);
  ModelSummary model_info() const { return admission_->model(); }
  const RequestAdmission& admission() const { return *admission_; }
  ClusterSummary cluster_info() const;
  std::optional<KvEventsSince> kv_events_since(uint64_t from);
  // Hands the drivers' KV events to the router (where it reads them) and to kv_feed_ (where
  // kept). Under mutex_.
  void take_kv_events();
  HealthSummary health() const;
  std::string metrics_text() const { return metrics_.render(); }
  ServiceTotals totals() const { return metrics_.totals(); }
  void count_refused_request() { metrics_.rejected(Rejection::kInvalid); }
  void count_unauthorized_request() { metrics_.rejected(Rejection::kUnauthorized); }
  size_t drain(double timeout_seconds);
  void end_drain_now() {
    {
      std::lock_guard lock(mutex_);
      drain_cut_short_ = true;
    }
    emptied_.notify_all();
  }
  void open_kv_link(const std::string& link_name, const std::vector<uint8_t>& rendezvous);
  void send_held_kv(const std::string& link_name, const KvStage& held, bool drop);
  size_t in_flight() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }

  void forget(std::span<const uint64_t> numeric_ids) override;

 private:
  struct Placement {
    uint32_t engine;
    uint64_t numeric_id;
    uint32_t decode_engine;  // disaggregated: where it decodes; else kNoEngine
    std::string client_id;
    const RequestStream* stream;  // to tell it from a later request under the same client id
  };
  static constexpr uint32_t kNoEngine = std::numeric_limits<uint32_t>::max();
  // Aborts go to both engines of a disaggregated request: the one holding it acts, the other
  // ignores it (or forwards it behind a hand-off in flight, see EngineDriver::apply_abort()).
  void send_abort(const Placement& placement, AbortCause cause) {
    drivers_[placement.engine]->enqueue_abort(placement.numeric_id, cause);
    if (placement.decode_engine != kNoEngine) {
      drivers_[placement.decode_engine]->enqueue_abort(placement.numeric_id, cause);
    }
  }
  ServiceError rejected(Rejection why, ServiceError error);
  void track(Placement placement);  // mutex_ held
  void stop_drivers();
  // Every plugin instance's counters and gauges to /metrics.
  void export_plugin_metrics();
  // Engine processes whose [kv_transport] has peer links: KV between processes over them.
  void set_up_links(const core::DeploymentConfig& deployment, std::shared_ptr<KvLinkPeers> peers);

  const std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  const core::WallClock clock_{origin_};
  std::string deployment_name_;
  const uint64_t incarnation_ = random_u64();  // ClusterSummary::incarnation
  // Before the cluster: its plugins' host services send their metrics here until they are gone.
  ServingMetrics metrics_;
  std::vector<EngineSeries> engine_series_;  // per engine, as its driver records them
  std::unique_ptr<core::Cluster> cluster_;
  std::unique_ptr<RequestAdmission> admission_;
  // An engine process ([server] role = "engine") takes prefill_only / kv_source requests from its
  // router; a process that faces clients refuses them (they name shared-memory objects).
  bool accepts_handoffs_ = false;
  std::optional<KvStageJanitor> stage_janitor_;  // engine processes: staged KV nobody read
  std::unique_ptr<KvHandoff> handoff_;  // disaggregated deployments only; outlives the drivers
  std::unique_ptr<KvLinks> links_;      // engine processes with peer links; outlives the drivers
  std::unique_ptr<HeldKv> held_;        // kv_handoff = "link"; outlives the drivers
  std::vector<std::unique_ptr<EngineDriver>> drivers_;  // destroyed before the cluster's engines
  std::shared_ptr<Link> link_ = std::make_shared<Link>();

  mutable std::mutex mutex_;  // guards what follows, and serialises routing
  std::condition_variable emptied_;
  // Every request from submit to its finish, by numeric id.
  std::unordered_map<uint64_t, Placement> requests_;
  // The client ids of those not aborted yet. An abort frees the id at once, as in vLLM: a retry
  // may reuse it while the engine is still letting go of the aborted request.
  std::unordered_map<std::string, uint64_t> client_ids_;
  std::vector<hw_engine_load> loads_;   // routing scratch
  std::vector<hw_kv_event> kv_events_;  // routing scratch
  // An engine process's engines' KV events for its router process; null in any other process.
  std::unique_ptr<KvEventFeed> kv_feed_;
  // Its size in events: at one read per load report (0.05 s by default) and one event per 64
  // tokens stored, taken or evicted, far more than a report's worth.
  static constexpr size_t kKvFeedEvents = 1 << 16;
  RouterWatch router_watch_;
  uint64_t next_numeric_id_ = 1;
  // kAdmitting, then kDraining (a drain began: only continuations are taken), then kClosed (the
  // drain ended, or the drivers stop: nothing is taken). Changed to kClosed under mutex_.
  enum class Admission { kAdmitting, kDraining, kClosed };
  std::atomic<Admission> admission_state_{Admission::kAdmitting};
  // Whether `input` may be taken now: anything while admitting; while draining only the
  // continuation of a request a router admitted before the drain (its KV staged by a prefill
  // process), which the drain then finishes instead of failing it after its first token.
  bool accepts(const GenerateInput& input) const {
    const Admission state = admission_state_.load();
    return state == Admission::kAdmitting ||
           (state == Admission::kDraining && accepts_handoffs_ && input.kv_source);
  }
  bool drain_cut_short_ = false;  // end_drain_now() ran (guarded)
};

LocalGenerationService::Impl::Impl(const core::DeploymentConfig& deployment,
                                   LocalServiceOptions options)
    : deployment_name_(deployment.name), accepts_handoffs_(deployment.server.role == "engine") {
  const std::string where = deployment.file.string();
  cluster_ = std::make_unique<core::Cluster>(deployment, origin_);
  export_plugin_metrics();
  if (accepts_handoffs_) {
    // Objects a crashed engine process staged and nobody read.
    if (const size_t removed = sweep_orphaned_kv_stages()) {
      spdlog::warn("removed {} staged KV objects of engine processes that no longer run", removed);
    }
    stage_janitor_.emplace();
  }
  if (cluster_->is_virtual()) {
    throw core::Error(fmt::format(
        "{}: model '{}' reports step durations (a simulated model on the virtual clock); serve a "
        "model that runs on the wall clock, e.g. plugin = \"cpu\"",
        where, deployment.model.plugin->short_name()));
  }

  ModelSummary served;
  served.name = options.model_name;
  served.vocab = cluster_->engine(0).model_info().vocab;
  served.max_model_len = cluster_->admitted_max_model_len();
  const hw_model_info& first = cluster_->engine(0).model_info();
  bool one_shape = true;
  for (size_t e = 0; e < cluster_->size(); ++e) {
    const hw_model_info& info = cluster_->engine(e).model_info();
    one_shape = one_shape && info.layers == first.layers && info.kv_heads == first.kv_heads &&
                info.head_dim == first.head_dim;
    served.samples_on_host =
        served.samples_on_host && (info.returns_logits != 0 || info.returns_logits_on_request != 0);
    served.reads_token_ids = served.reads_token_ids && info.needs_token_ids != 0;
    served.reports_prompt_logprobs = served.reports_prompt_logprobs &&
                                     info.returns_prompt_logits != 0 && info.needs_token_ids != 0;
  }
  if (one_shape) {  // engine groups of other checkpoints (model_options) say none
    served.layers = first.layers;
    served.kv_heads = first.kv_heads;
    served.head_dim = first.head_dim;
  }
  admission_ = std::make_unique<RequestAdmission>(deployment, std::move(served));

  loads_.resize(cluster_->size());
  // An engine process keeps its engines' KV events for the router process in front of it, which
  // asks for them in each load report (ClusterInfo); before the drivers, which publish them. Only
  // a process with one engine that caches prefixes: the router sees a process as one engine, and
  // one engine's eviction of a piece says nothing of another's copy (nor does a cache that is off).
  if (deployment.server.role == "engine") {
    size_t caching = 0;
    for (size_t e = 0; e < cluster_->size(); ++e) {
      if (cluster_->engine(e).prefix_caching()) ++caching;
    }
    if (caching == 1) {
      cluster_->keep_kv_events();
      kv_feed_ = std::make_unique<KvEventFeed>(kKvFeedEvents);
    }
  }
  {
    std::lock_guard lock(link_->mutex);
    link_->service = this;
  }
  if (core::KvTransportInstance* transport = cluster_->transport()) {
    handoff_ = std::make_unique<KvHandoff>(*transport);
  }
  set_up_links(deployment, std::move(options.kv_link_peers));
  std::vector<EngineDriver*> drivers;
  for (size_t e = 0; e < cluster_->size(); ++e) {
    core::Engine& engine = cluster_->engine(e);
    engine_series_.push_back(metrics_.engine(engine.config().index, engine.config().pool));
    drivers_.push_back(std::make_unique<EngineDriver>(engine, engine_series_.back(), *this,
                                                      handoff_.get(), options.step_trace));
    drivers.push_back(drivers_.back().get());
  }
  if (handoff_) handoff_->set_drivers(std::move(drivers));
  for (auto& driver : drivers_) driver->start();
}

void LocalGenerationService::Impl::export_plugin_metrics() {
  for (size_t e = 0; e < cluster_->size(); ++e) {
    core::Engine& engine = cluster_->engine(e);
    const std::string index = std::to_string(engine.config().index);
    const std::string& pool = engine.config().pool;
    engine.model_host().export_metrics(&metrics_.plugin(index, pool, "model", engine.model_name()));
    engine.scheduler_host().export_metrics(
        &metrics_.plugin(index, pool, "scheduler", engine.scheduler_name()));
  }
  cluster_->router_host().export_metrics(
      &metrics_.plugin("", "", "router", cluster_->router_name()));
  if (core::HostServices* host = cluster_->transport_host()) {
    host->export_metrics(&metrics_.plugin("", "", "kv_transport", cluster_->transport()->name()));
  }
}

void LocalGenerationService::Impl::set_up_links(const core::DeploymentConfig& deployment,
                                                std::shared_ptr<KvLinkPeers> peers) {
  const std::string where = deployment.file.string();
  const bool hold = deployment.server.kv_handoff == "link";
  if (handoff_ == nullptr || !accepts_handoffs_ || !handoff_->has_peer_links()) {
    if (!hold) return;
    throw core::Error(fmt::format(
        "{}: [server] kv_handoff = \"link\" keeps prefilled KV in the engine for a peer link of "
        "the KV transports; it needs role = \"engine\" and a [kv_transport] whose plugin has "
        "peer links (nccl, host_copy){}",
        where,
        handoff_ == nullptr ? ", and this file has no [kv_transport]"
        : !handoff_->has_peer_links()
            ? fmt::format(": '{}' has none", handoff_->transport_name())
            : fmt::format(": this process's role is \"{}\"", deployment.server.role)));
  }
  // A link joins the transports for one kind of memory on one device: every engine's KV there.
  const hw_memory_desc memory = cluster_->engine(0).kv_memory();
  if (memory.kind == HW_MEMORY_NONE || memory.base == nullptr) {
    if (!hold) return;
    throw core::Error(fmt::format(
        "{}: [server] kv_handoff = \"link\": model '{}' describes no KV memory a transport can "
        "move",
        where, deployment.model.plugin->short_name()));
  }
  for (size_t e = 1; e < cluster_->size(); ++e) {
    const hw_memory_desc other = cluster_->engine(e).kv_memory();
    if (other.kind != memory.kind || other.device_id != memory.device_id) {
      if (!hold) return;  // links are only needed to pull, which such a process does not do
      throw core::Error(fmt::format(
          "{}: [server] kv_handoff = \"link\": the engines of one process must keep their KV on "
          "one device (engine0 on device {}, engine{} on device {}); run one engine process per "
          "GPU",
          where, memory.device_id, e, other.device_id));
    }
  }
  links_ = std::make_unique<KvLinks>(*handoff_, std::move(peers), memory);
  if (hold) held_ = std::make_unique<HeldKv>(*handoff_, deployment.server.kv_link_hold_s);
  handoff_->set_peer_parts(links_.get(), held_.get());
}

void LocalGenerationService::Impl::open_kv_link(const std::string& link_name,
                                                const std::vector<uint8_t>& rendezvous) {
  if (held_ == nullptr) throw detail::no_held_kv();
  links_->accept(link_name, rendezvous);
}

void LocalGenerationService::Impl::send_held_kv(const std::string& link_name, const KvStage& held,
                                                bool drop) {
  if (held_ == nullptr) throw detail::no_held_kv();
  links_->send(*held_, link_name, held, drop);
}

LocalGenerationService::Impl::~Impl() {
  {
    std::lock_guard lock(link_->mutex);
    link_->service = nullptr;
  }
  // Sends still posted on links other processes opened fail now, instead of keeping the drivers'
  // shutdown waiting until the transport times them out.
  if (links_) links_->close_accepted();
  stop_drivers();
}

void LocalGenerationService::Impl::stop_drivers() {
  {
    // Under the mutex: a submit() that was taken holds it until its request is in a driver's
    // inbox, so every admitted request is in an inbox before its driver's last swap (set without
    // the lock, a submit racing this could enqueue into a driver whose thread had exited, and its
    // stream would never finish).
    std::lock_guard lock(mutex_);
    admission_state_ = Admission::kClosed;
  }
  // Each driver aborts what it still serves (the streams finish kAbort) before its thread ends.
  for (auto& driver : drivers_) driver->stop();
}

ServiceError LocalGenerationService::Impl::rejected(Rejection why, ServiceError error) {
  metrics_.rejected(why);
  return error;
}

std::shared_ptr<RequestStream> LocalGenerationService::Impl::submit(GenerateInput input) {
  if (!accepts(input)) {
    throw rejected(
        Rejection::kUnavailable,
        ServiceError(ErrorCode::kUnavailable, "the server is draining and admits no new requests"));
  }
  AdmittedRequest admitted;
  try {
    admitted = admission_->admit(input);
    if (!accepts_handoffs_) refuse_handoff_fields(input);
    validate_handoff(input, admitted.prompt.size(), model_info().vocab);
  } catch (const ServiceError& e) {
    throw rejected(Rejection::kInvalid, e);
  }
  // A continued request's stream carries only the outputs after its generated ids.
  const uint32_t continued = static_cast<uint32_t>(
      std::min<size_t>(input.generated_ids.size(), input.sampling.min_tokens));
  std::unique_ptr<IncrementalDecoder> decoder =
      admission_->decoder(input, admitted.prompt, input.sampling.min_tokens - continued);
  std::vector<int32_t>& prompt = admitted.prompt;
  const std::string& request_class = admitted.request_class;

  core::NewRequest request;
  request.max_output_tokens = input.max_tokens;
  request.priority = input.priority;
  request.sampling = std::move(input.sampling);
  const uint32_t prompt_tokens = static_cast<uint32_t>(prompt.size());
  request.prompt_tokens = prompt_tokens;
  request.prompt = std::move(prompt);
  // Before the lock: hashing a long prompt takes a while, and every request waits on the lock.
  std::vector<uint64_t> prefix_hashes;
  if (cluster_->hashes_prefixes()) core::route_prefix_hashes(request.prompt, prefix_hashes);

  std::lock_guard lock(mutex_);
  if (!accepts(input)) {
    throw rejected(
        Rejection::kUnavailable,
        ServiceError(ErrorCode::kUnavailable, "the server is draining and admits no new requests"));
  }
  std::string id = std::move(input.request_id);
  if (id.empty()) {
    do {
      id = random_request_id("req-");
    } while (client_ids_.count(id) != 0);
  } else if (client_ids_.count(id) != 0) {
    throw rejected(Rejection::kInvalid,
                   ServiceError(ErrorCode::kInvalidArgument,
                                fmt::format("request id {} is already in flight", quote_input(id)),
                                "request_id"));
  }
  request.id = next_numeric_id_++;
  // The stop-string callback targets this request's numeric id, not just its client id: the
  // consumer may see the stop string after this request finished and a new one reused the id.
  std::weak_ptr<Link> link = link_;
  auto on_stop_string = [link, numeric_id = request.id](const std::string& id) {
    if (auto shared = link.lock()) {
      std::lock_guard lock(shared->mutex);
      if (shared->service != nullptr)
        shared->service->abort(id, AbortCause::kStopString, numeric_id);
    }
  };
  for (size_t e = 0; e < drivers_.size(); ++e) loads_[e] = drivers_[e]->load();
  hw_route_decision decision{};
  // A request without max_tokens (chat) runs to the end of the context of the engines it is
  // placed on, as vLLM's does on the server it reaches. Behind a router that places by length, it
  // is routed by what it needs at least (one token, min_tokens), so that an engine with a shorter
  // context may take it, and bounded by the shortest context of its engines once placed. (A router
  // that knows no lengths has every engine hold what is admitted, and is told max_tokens.)
  const bool open_ended = input.max_tokens_to_context_end && cluster_->router_reads_model_lengths();
  const hw_route_request route{
      request.id, prompt_tokens,
      open_ended ? std::max(1u, request.sampling.min_tokens) : request.max_output_tokens,
      request.priority, hw_str{request_class.data(), request_class.size()}};
  const auto routing = std::chrono::steady_clock::now();
  try {
    // What the caches stored and evicted up to each engine's last step, before the router reads
    // the loads (a router that fails on them fails this request, as in route()).
    if (cluster_->reads_kv_events() || kv_feed_ != nullptr) take_kv_events();
    decision = cluster_->route(route, loads_, prefix_hashes);
  } catch (const core::Error& e) {
    router_watch_.routed(std::chrono::steady_clock::now() - routing, id, cluster_->router_name());
    auto [why, error] = router_watch_.failed(e, id, "engine");
    throw rejected(why, std::move(error));
  }
  router_watch_.routed(std::chrono::steady_clock::now() - routing, id, cluster_->router_name());
  // Inside the deployment: RouterInstance::route() refuses a decision naming an engine it has not.
  const uint32_t e = decision.prefill_engine;
  const uint32_t d = decision.decode_engine;
  const bool disaggregated = d != e;
  if (disaggregated && handoff_ == nullptr) {
    throw rejected(Rejection::kInternal,
                   ServiceError(ErrorCode::kInternal,
                                fmt::format("router '{}' placed request \"{}\" on engine{} for "
                                            "prefill and engine{} for decode, but the deployment "
                                            "has no [kv_transport] to move its KV",
                                            cluster_->router_name(), id, e, d)));
  }
  EngineDriver& driver = *drivers_[e];
  for (const uint32_t engine : {e, d}) {
    if (!drivers_[engine]->alive()) {
      throw rejected(Rejection::kUnavailable,
                     ServiceError(ErrorCode::kUnavailable,
                                  fmt::format("engine{} (chosen by router '{}') is out of service",
                                              engine, cluster_->router_name())));
    }
  }
  if (open_ended) {
    const uint32_t length =
        std::min(cluster_->engine(e).max_model_len(), cluster_->engine(d).max_model_len());
    if (length > prompt_tokens) {
      request.max_output_tokens = std::min(request.max_output_tokens, length - prompt_tokens);
    }
  }
  const core::EngineConfig& config = cluster_->engine(e).config();
  if (config.max_waiting != 0 && driver.waiting_including_inbox() >= config.max_waiting) {
    throw rejected(Rejection::kQueueFull,
                   ServiceError(ErrorCode::kResourceExhausted,
                                fmt::format("engine{}'s waiting queue is full ({} requests); retry "
                                            "later",
                                            e, config.max_waiting)));
  }
  request.arrival = clock_.now();
  auto stream = std::make_shared<RequestStream>(id, prompt_tokens, std::move(decoder),
                                                std::move(on_stop_string));
  if (input.return_prompt_ids) stream->set_prompt_ids(request.prompt);
  stream->set_prompt_reasoning(admitted.prompt_reasoning);
  if (request.sampling.prompt_logprobs >= 0 && !request.prompt.empty() && !input.kv_source) {
    stream->expect_prompt_logprobs(request.prompt.front());
  }
  // A continuation of another process's prefill goes straight to its decode engine.
  const uint32_t admitting = input.kv_source && disaggregated ? d : e;
  auto state = std::make_unique<InFlightRequest>();
  state->id = id;
  state->numeric_id = request.id;
  state->stream = stream;
  state->series =
      metrics_.request(admitting, cluster_->engine(admitting).config().pool, request_class);
  state->decode_engine = disaggregated ? d : kNoEngine;
  if (disaggregated && !input.kv_source) {
    state->decode_series = metrics_.request(d, cluster_->engine(d).config().pool, request_class);
    state->expected_at_decode =
        ExpectedHandoff(drivers_[d]->expected_handoffs(), request.max_output_tokens);
  }
  if (input.kv_source) {
    // Prefilled by another process: continue from its staged KV (kv_handoff.h, arrive_from_stage),
    // on the decode engine when this process is disaggregated itself.
    const uint32_t target = disaggregated ? d : e;
    track(Placement{target, request.id, kNoEngine, id, stream.get()});
    Handoff handoff;
    handoff.request.id = request.id;
    handoff.request.prompt_tokens = prompt_tokens;
    handoff.request.output_tokens = static_cast<uint32_t>(input.generated_ids.size());
    handoff.request.computed_tokens = input.kv_source->computed_tokens;
    handoff.request.max_output_tokens = request.max_output_tokens;
    handoff.request.priority = request.priority;
    handoff.request.arrival = request.arrival;
    handoff.request.sampling = std::move(request.sampling);
    handoff.request.tokens = std::move(request.prompt);
    handoff.request.tokens.insert(handoff.request.tokens.end(), input.generated_ids.begin(),
                                  input.generated_ids.end());
    handoff.request.record = &state->record;
    state->record.arrival = request.arrival;
    state->last_token_time = request.arrival;  // its next token's gap counts from here
    state->continued = true;
    handoff.staged = std::move(input.kv_source);
    handoff.ready = request.arrival;
    handoff.state = std::move(state);
    drivers_[target]->enqueue_incoming(std::move(handoff));
    return stream;
  }
  request.prefill_only = disaggregated || input.prefill_only;
  state->stage_kv = input.prefill_only;
  track(Placement{e, request.id, disaggregated ? d : kNoEngine, id, stream.get()});
  driver.enqueue_submit(std::move(request), std::move(state));
  return stream;
}

bool LocalGenerationService::Impl::abort(const std::string& request_id, AbortCause cause,
                                         uint64_t numeric_id) {
  std::lock_guard lock(mutex_);
  auto it = client_ids_.find(request_id);
  if (it == client_ids_.end()) return false;
  if (numeric_id != 0 && it->second != numeric_id) return false;  // id reused since
  send_abort(requests_.at(it->second), cause);
  client_ids_.erase(it);
  return true;
}

bool LocalGenerationService::Impl::abort(const RequestStream& stream) {
  uint64_t numeric_id = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = client_ids_.find(stream.id());
    if (it == client_ids_.end() || requests_.at(it->second).stream != &stream) return false;
    numeric_id = it->second;
  }
  // Should the request end and its id be taken again meanwhile, the numeric id tells them apart.
  return abort(stream.id(), AbortCause::kClient, numeric_id);
}

void LocalGenerationService::Impl::track(Placement placement) {
  client_ids_.emplace(placement.client_id, placement.numeric_id);
  const uint64_t numeric_id = placement.numeric_id;
  requests_.emplace(numeric_id, std::move(placement));
}

void LocalGenerationService::Impl::forget(std::span<const uint64_t> numeric_ids) {
  std::lock_guard lock(mutex_);
  for (const uint64_t numeric_id : numeric_ids) {
    auto it = requests_.find(numeric_id);
    if (it == requests_.end()) continue;
    // Unless a client aborted it and a new request took its id since.
    auto client = client_ids_.find(it->second.client_id);
    if (client != client_ids_.end() && client->second == numeric_id) client_ids_.erase(client);
    requests_.erase(it);
  }
  if (requests_.empty()) emptied_.notify_all();
}

ClusterSummary LocalGenerationService::Impl::cluster_info() const {
  ClusterSummary summary;
  summary.deployment = deployment_name_;
  summary.router = cluster_->router_name();
  for (size_t e = 0; e < drivers_.size(); ++e) {
    const hw_engine_load load = drivers_[e]->load();
    const core::EngineConfig& config = cluster_->engine(e).config();
    summary.engines.push_back(EngineSummary{
        config.index, config.pool, engine_role_label(config.role), load.alive != 0, load.running,
        load.waiting, load.outstanding_tokens, load.kv_blocks_free, load.kv_blocks_total,
        load.queued_prefill_tokens, load.block_size, std::string(), drivers_[e]->step_seconds()});
    const EngineSeries& series = engine_series_[e];
    EngineSummary& counts = summary.engines.back();
    counts.max_waiting = config.max_waiting;
    counts.prefix_caching = config.prefix_caching;
    counts.preemptions = static_cast<uint64_t>(series.preemptions.value());
    // Hits before queries: the engine thread adds queries first, so hits read first never exceed
    // the queries read after them.
    counts.prefix_cache_hits = static_cast<uint64_t>(series.prefix_cache_hits.value());
    counts.prefix_cache_queries = static_cast<uint64_t>(series.prefix_cache_queries.value());
  }
  summary.plugin_metrics = metrics_.plugin_samples();
  summary.incarnation = incarnation_;
  return summary;
}

void LocalGenerationService::Impl::take_kv_events() {
  const bool router_reads = cluster_->reads_kv_events();
  std::optional<core::Error> failed;
  for (size_t e = 0; e < drivers_.size(); ++e) {
    kv_events_.clear();
    drivers_[e]->take_kv_events(kv_events_);
    if (kv_events_.empty()) continue;
    // The feed first, and every engine's whatever the router does: a router plugin that fails on
    // them must not take them from the router processes that read the feed.
    if (kv_feed_ != nullptr) kv_feed_->append(kv_events_);
    if (!router_reads) continue;
    try {
      cluster_->kv_events(static_cast<uint32_t>(e), kv_events_);
    } catch (const core::Error& error) {
      if (!failed) failed = error;
    }
  }
  if (failed) throw *failed;
}

std::optional<KvEventsSince> LocalGenerationService::Impl::kv_events_since(uint64_t from) {
  if (kv_feed_ == nullptr) return std::nullopt;
  std::lock_guard lock(mutex_);
  try {
    take_kv_events();
  } catch (const core::Error& e) {
    // This process's router failed on them: its own fault, not the reading process's, which
    // would otherwise see this process as down.
    router_watch_.events_failed(e);
  }
  return kv_feed_->since(from);
}

HealthSummary LocalGenerationService::Impl::health() const {
  std::vector<EngineHealth> engines;
  for (size_t e = 0; e < drivers_.size(); ++e) {
    engines.push_back(
        {cluster_->engine(e).config().role, drivers_[e]->alive(), drivers_[e]->step_seconds()});
  }
  return summarize_health(admission_state_ == Admission::kAdmitting, engines);
}

size_t LocalGenerationService::Impl::drain(double timeout_seconds) {
  Admission admitting = Admission::kAdmitting;
  admission_state_.compare_exchange_strong(admitting, Admission::kDraining);
  std::unique_lock lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(std::max(0.0, timeout_seconds)));
  if (accepts_handoffs_) {
    // An engine process idle at its SIGTERM still takes, for a moment, the continuations of
    // requests a router admitted before: one whose prefill is finishing on a prefill process right
    // now, sent before the router's next poll sees this process draining.
    emptied_.wait_until(lock, std::min(deadline, now + kContinuationGrace),
                        [&] { return drain_cut_short_; });
  }
  // Requests in flight, and (kv_handoff = "link") KV held for decode processes, which pull it for
  // requests they are continuing: exiting with it held left them to prefill again (helper-163).
  // The drivers free what was sent without signalling here: polled while only held KV is left.
  constexpr auto kHeldPoll = std::chrono::milliseconds(10);
  while (!drain_cut_short_ && std::chrono::steady_clock::now() < deadline) {
    if (!requests_.empty()) {
      emptied_.wait_until(lock, deadline, [&] { return requests_.empty() || drain_cut_short_; });
    } else if (held_ != nullptr && held_->count() > 0) {
      emptied_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + kHeldPoll),
                          [&] { return drain_cut_short_ || !requests_.empty(); });
    } else {
      break;
    }
  }
  if (const size_t held = held_ != nullptr ? held_->count() : 0; held > 0) {
    spdlog::warn(
        "drain: the KV of {} requests held for decode processes was not pulled {}; it "
        "is freed, and they prefill those requests again",
        held,
        drain_cut_short_ ? std::string("before the drain was cut short")
                         : fmt::format("within {} s", timeout_seconds));
  }
  // Under the lock: no continuation slips in after the decision.
  admission_state_ = Admission::kClosed;
  const size_t left = requests_.size();
  for (const auto& [numeric_id, placement] : requests_) {
    send_abort(placement, AbortCause::kShutdown);
  }
  // Aborts take effect between steps: at most one forward pass per engine away.
  emptied_.wait(lock, [&] { return requests_.empty(); });
  if (left > 0) {
    spdlog::warn("drain: {} requests still running {} were aborted", left,
                 drain_cut_short_ ? std::string("when the drain was cut short")
                                  : fmt::format("after {} s", timeout_seconds));
  }
  return left;
}

LocalGenerationService::LocalGenerationService(const core::DeploymentConfig& deployment,
                                               LocalServiceOptions options)
    : impl_(std::make_unique<Impl>(deployment, std::move(options))) {}

LocalGenerationService::~LocalGenerationService() = default;

std::shared_ptr<RequestStream> LocalGenerationService::submit(GenerateInput input) {
  return impl_->submit(std::move(input));
}
bool LocalGenerationService::abort(const std::string& request_id) {
  return impl_->abort(request_id, AbortCause::kClient);
}
bool LocalGenerationService::abort(const RequestStream& stream) { return impl_->abort(stream); }
ModelSummary LocalGenerationService::model_info() const { return impl_->model_info(); }
std::vector<int32_t> LocalGenerationService::tokenize(const GenerateInput& input) const {
  return impl_->admission().tokenize(input);
}
std::string LocalGenerationService::detokenize(const std::string& model,
                                               std::span<const int32_t> ids) const {
  return impl_->admission().detokenize(model, ids);
}
ClusterSummary LocalGenerationService::cluster_info() const { return impl_->cluster_info(); }
std::optional<KvEventsSince> LocalGenerationService::kv_events_since(uint64_t from) {
  return impl_->kv_events_since(from);
}
HealthSummary LocalGenerationService::health() const { return impl_->health(); }
std::string LocalGenerationService::metrics_text() const { return impl_->metrics_text(); }
ServiceTotals LocalGenerationService::totals() const { return impl_->totals(); }
void LocalGenerationService::count_refused_request() { impl_->count_refused_request(); }
void LocalGenerationService::count_unauthorized_request() { impl_->count_unauthorized_request(); }
size_t LocalGenerationService::drain(double timeout_seconds) {
  return impl_->drain(timeout_seconds);
}
void LocalGenerationService::end_drain_now() { impl_->end_drain_now(); }
size_t LocalGenerationService::in_flight() const { return impl_->in_flight(); }
void LocalGenerationService::open_kv_link(const std::string& link_name,
                                          const std::vector<uint8_t>& rendezvous) {
  impl_->open_kv_link(link_name, rendezvous);
}
void LocalGenerationService::send_held_kv(const std::string& link_name, const KvStage& held,
                                          bool drop) {
  impl_->send_held_kv(link_name, held, drop);
}

}  // namespace headway::serving
