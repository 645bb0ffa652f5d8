#include <fmt/format.h>
#include <headway/core/clock.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/route_prefix.h>
#include <headway/serving/echoed_input.h>
#include <headway/serving/forwarded_plugin_metrics.h>
#include <headway/serving/metrics_serving.h>
#include <headway/serving/random_bits.h>
#include <headway/serving/remote_generation_service.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine_process.h"
#include "held_kv_drop.h"
#include "kv_stage_file.h"
#include "proto_conversion.h"
#include "proxied_generate.h"
#include "request_admission.h"
#include "request_validation.h"
#include "router_watch.h"

namespace headway::serving {
namespace {

using Clock = std::chrono::steady_clock;

// How long a process must fail every poll before the calls it still holds are given up.
constexpr std::chrono::seconds kGiveUpAfter{2};

// "#" and 16 hex digits: what upstream_request() appends to a client's id.
constexpr size_t kUpstreamIdSuffixLength = 17;

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

// One poll's per-call deadline: long enough for a busy engine process to answer between two of
// its steps (its gRPC threads do not wait for a step), short enough that one hung process delays
// the others' polls by little.
std::chrono::milliseconds poll_deadline(double interval_s) {
  return std::clamp(milliseconds(4.0 * interval_s), std::chrono::milliseconds(250),
                    std::chrono::milliseconds(2000));
}

v1::GenerateRequest upstream_request(const std::string& id, const AdmittedRequest& admitted,
                                     const GenerateInput& input) {
  v1::GenerateRequest request;
  // Unique upstream, not the client's id: a client may reuse its id as soon as it aborted the
  // request, before the engine process has let go of the old one.
  // The suffix is 17 characters; a long client id is shortened to keep within the engine
  // process's limit (the suffix alone keeps the result unique).
  const std::string_view client_id =
      std::string_view(id).substr(0, kMaxRequestIdLength - kUpstreamIdSuffixLength);
  request.set_request_id(fmt::format("{}#{:016x}", client_id, random_u64()));
  request.mutable_token_ids()->mutable_ids()->Add(admitted.prompt.begin(), admitted.prompt.end());
  v1::SamplingParams& sampling = *request.mutable_sampling();
  sampling.set_temperature(input.sampling.temperature);
  sampling.set_top_p(input.sampling.top_p);
  sampling.set_seed(input.sampling.seed);
  sampling.set_max_tokens(input.max_tokens);
  sampling.set_top_k(input.sampling.top_k);
  sampling.set_min_p(input.sampling.min_p);
  sampling.set_ignore_eos(input.sampling.ignore_eos);
  sampling.mutable_stop_token_ids()->Add(input.sampling.stop_token_ids.begin(),
                                         input.sampling.stop_token_ids.end());
  sampling.set_presence_penalty(input.sampling.presence_penalty);
  sampling.set_frequency_penalty(input.sampling.frequency_penalty);
  sampling.set_repetition_penalty(input.sampling.repetition_penalty);
  sampling.set_min_tokens(input.sampling.min_tokens);
  for (const auto& [id, bias] : input.sampling.logit_bias) {
    (*sampling.mutable_logit_bias())[id] = bias;
  }
  sampling.mutable_allowed_token_ids()->Add(input.sampling.allowed_token_ids.begin(),
                                            input.sampling.allowed_token_ids.end());
  for (const std::vector<int32_t>& word : input.sampling.bad_words_ids) {
    sampling.add_bad_words_ids()->mutable_ids()->Add(word.begin(), word.end());
  }
  if (input.sampling.logprobs >= 0) {
    sampling.set_logprobs(static_cast<uint32_t>(input.sampling.logprobs));
  }
  if (input.sampling.prompt_logprobs >= 0) {
    sampling.set_prompt_logprobs(static_cast<uint32_t>(input.sampling.prompt_logprobs));
  }
  request.set_priority(input.priority);
  request.set_request_class(admitted.request_class);
  if (input.guided.kind != GuidedOutput::Kind::kNone) {
    grpc_frontend::to_proto(input.guided, *request.mutable_guided());
  }
  return request;
}

bool same_model(const ModelSummary& a, const ModelSummary& b) {
  return a.vocab == b.vocab && a.tokenizer == b.tokenizer;
}

// The same KV shape, or one of them does not say its shape (a process of an older build).
bool same_kv_shape(const ModelSummary& a, const ModelSummary& b) {
  return a.layers == 0 || b.layers == 0 ||
         (a.layers == b.layers && a.kv_heads == b.kv_heads && a.head_dim == b.head_dim);
}

// "a vocabulary of 128256 (bpe tokenizer) and 32 layers x 8 KV heads x 128 dims"
std::string model_label(const ModelSummary& model) {
  return fmt::format("a vocabulary of {} ({} tokenizer) and {}", model.vocab, model.tokenizer,
                     kv_shape_label(model));
}

}  // namespace

class RemoteGenerationService::Impl final : public ProxiedCallOwner {
 public:
  // Lets a stream's stop-string callback reach the service only while the service lives.
  struct Link {
    std::mutex mutex;
    Impl* service = nullptr;
  };

  Impl(const core::DeploymentConfig& deployment, const RemoteServiceOptions& options);
  ~Impl() override;

  std::shared_ptr<RequestStream> submit(GenerateInput input);
  bool abort(const std::string& request_id, AbortCause cause, const RequestStream* only = nullptr);
  ModelSummary model_info() const { return admission_->model(); }
  const RequestAdmission& admission() const { return *admission_; }
  ClusterSummary cluster_info() const;
  HealthSummary health() const;
  std::string metrics_text() const;
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

  void call_done(const ProxiedGenerate& call) override;
  bool retry_elsewhere(ProxiedGenerate& failed, bool busy) override;
  // Asks the router plugin where a request would go now, from the processes' current loads (under
  // mutex_). Throws core::Error when it can go nowhere.
  // prefix_hashes: core::route_prefix_hashes of the prompt, for a router that reads how prompts
  // begin (ABI 1.8; empty for another).
  hw_route_decision route_now(uint64_t numeric_id, uint32_t prompt_tokens,
                              std::span<const uint64_t> prefix_hashes, uint32_t max_tokens,
                              int32_t priority, std::string_view request_class);
  // Whether prompts are worth hashing for the router: it reads how prompts begin (ABI 1.8) and
  // some engine process caches them (as their last answers said; one that has not answered yet
  // counts as caching). Takes each process's lock in turn, not mutex_; engines_ never changes.
  bool hashes_prefixes() const {
    if (!router_->reads_prefixes()) return false;
    return std::any_of(
        engines_.begin(), engines_.end(),
        [](const std::unique_ptr<EngineProcess>& e) { return e->caches_prefixes(); });
  }
  // route_now() for a call already in flight; nullopt when it can go nowhere.
  // `generated`: the tokens the request has streamed so far (a prefill call's upstream lists
  // none, though its first token is out).
  std::optional<hw_route_decision> route_again(const v1::GenerateRequest& upstream, bool open_ended,
                                               uint32_t generated);
  // A request without max_tokens (chat: `open_ended`) runs to the end of the context of the
  // processes it is placed on, as vLLM's does on the server it reaches. The output tokens the
  // router is told: max_tokens, or for an open-ended request behind a router that places by
  // length, what it needs at least (one token, min_tokens, one past those already generated), so
  // that a process with a shorter context may take it.
  uint32_t routed_output_tokens(bool open_ended, uint32_t max_tokens, uint32_t min_tokens,
                                uint32_t generated) const;
  // An open-ended request's max_tokens on `processes` (its prefill and decode process): to the
  // end of the shortest context among them, within `max_tokens` (what the router admits).
  uint32_t open_ended_max_tokens(uint32_t prompt_tokens, uint32_t max_tokens,
                                 std::initializer_list<uint32_t> processes) const;
  void call_refused(const ProxiedGenerate& call, ErrorCode code) override;
  bool continue_elsewhere(ProxiedGenerate& prefilled, const KvStage& stage) override;
  void discard_stage(const KvStage& stage) override;

 private:
  void connect(const std::string& where, const RemoteServiceOptions& options);
  void poll_loop();
  void poll_once();
  // Engine e's series from its last report: alive, and running, waiting and KV usage (0 while it
  // is down).
  void set_engine_gauges(size_t e) const;
  // Adds what engine process e counted since its last poll to its counters here (poll thread).
  void add_engine_counts(size_t e);
  void give_up_calls_to(uint32_t engine);
  // Warns once per engine process (and name) that serves under another name than the router.
  void warn_if_named_otherwise(const EngineProcess& engine, const ModelSummary& model);
  // Why `engine`, serving `model`, is refused for its KV shape; empty when it is not. Llama 3.1 8B
  // and 70B share vocabulary and tokenizer (same_model), but one cannot decode on the other's KV:
  // prefill and decode processes must all have the shape of the first of them that said one (it
  // becomes the reference). A mixed process of another shape than the first process's moves no
  // KV; it is warned about (its answers come from another model), as a name is.
  std::string kv_shape_refusal(const EngineProcess& engine, const ModelSummary& model);
  ServiceError rejected(Rejection why, ServiceError error) {
    metrics_.rejected(why);
    return error;
  }
  // Cancels every call in flight and waits until each has finished its stream.
  void cancel_all(std::unique_lock<std::mutex>& lock);

  const Clock::time_point origin_ = Clock::now();
  const core::WallClock clock_{origin_};
  const std::string deployment_name_;
  const double interval_s_;
  std::vector<std::unique_ptr<EngineProcess>> engines_;
  mutable std::vector<EngineSeries> engine_series_;
  std::vector<EngineSummary> counted_;  // per engine process: its counts when last added
  std::vector<bool> counted_known_;     // per engine process: counted_ holds its counts
  // Per engine process: its plugins' metrics in this router's /metrics (poll thread).
  std::vector<ForwardedPluginMetrics> forwarded_plugins_;
  ModelSummary reference_model_;  // what every engine process must serve
  // The router's own checkpoint ([model] path): its vocab_size, which the engine processes' model
  // must have when it is known, and the name it serves under, which theirs should have.
  std::optional<uint32_t> own_vocab_;
  std::string own_name_;
  bool own_checkpoint_ = false;
  std::vector<std::string> warned_name_;  // per engine process: the name last warned about
  // The KV shape of the prefill and decode processes, from the first of them that said one, and
  // which process that was ("engine0 at host:port"; empty until then).
  ModelSummary kv_reference_model_;
  std::string kv_reference_name_;
  std::vector<bool> warned_shape_;  // per engine process: its shape was warned about
  std::unique_ptr<RequestAdmission> admission_;
  // Before the router: its host services send its metrics here until it is gone.
  mutable ServingMetrics metrics_;
  std::unique_ptr<core::HostServices> router_host_;
  std::unique_ptr<core::RouterInstance> router_;
  // Requests re-sent to another engine process, by the process that failed before answering.
  CounterFamily& retries_ = metrics_.registry().counter(
      "headway_request_retries_total",
      "Requests re-sent to another engine process because the chosen one was unreachable, or its "
      "waiting queue full, before it answered, by that process.",
      {"engine", "pool"});
  std::shared_ptr<Link> link_ = std::make_shared<Link>();

  mutable std::mutex mutex_;  // guards what follows, and serialises routing
  std::condition_variable emptied_;
  std::unordered_map<std::string, std::shared_ptr<ProxiedGenerate>> calls_;
  RouterWatch router_watch_;
  // Calls a client aborted: their ids are free again (GenerationService::abort()), and no retry
  // or continuation takes their place (those look their call up in calls_). They end by
  // themselves, cancelled.
  std::unordered_map<const ProxiedGenerate*, std::shared_ptr<ProxiedGenerate>> leaving_;
  std::vector<hw_engine_load> loads_;    // routing scratch
  std::vector<uint64_t> prefix_hashes_;  // route_again()'s scratch, for a router that reads them
  std::vector<hw_kv_event> kv_events_;   // route_now()'s scratch
  // The engine processes' limits as the router plugin was last told them, and routing scratch.
  std::vector<hw_engine_limits> told_limits_;
  std::vector<hw_engine_limits> limits_now_;
  uint64_t next_numeric_id_ = 1;
  std::atomic<bool> admitting_{true};
  bool cancelling_ = false;       // cancel_all() ran: no call may take another's place (guarded)
  bool drain_cut_short_ = false;  // end_drain_now() ran (guarded)

  // Poller thread only: since when each process has failed every poll.
  std::vector<std::optional<Clock::time_point>> failing_since_;
  std::vector<bool> was_draining_;  // per engine process, as of the last poll (for the log)

  std::mutex poller_mutex_;
  std::condition_variable poller_wake_;
  bool poller_stop_ = false;  // guarded by poller_mutex_
  std::thread poller_;
};

RemoteGenerationService::Impl::Impl(const core::DeploymentConfig& deployment,
                                    const RemoteServiceOptions& options)
    : deployment_name_(deployment.name), interval_s_(deployment.server.load_report_interval_s) {
  const std::string where = deployment.file.string();
  for (const core::EngineConfig& engine : deployment.engines) {
    if (engine.address.empty()) {
      throw core::Error(
          fmt::format("{}: {} has no address: a router process fronts engine "
                      "processes only",
                      where, engine.name));
    }
    engines_.push_back(std::make_unique<EngineProcess>(engine.index, engine.pool, engine.role,
                                                       engine.address, options.api_key));
    engine_series_.push_back(metrics_.remote_engine(engine.index, engine.pool));
    // Exported from 0, as the refusals are: a rate() over a series that appears only at its first
    // increment misses that increment.
    retries_.with({std::to_string(engine.index), engine.pool});
  }
  own_checkpoint_ = !checkpoint_dir_of(deployment).empty();
  own_vocab_ = checkpoint_vocab_size(deployment);
  own_name_ = options.model_name.empty() ? default_model_name(deployment) : options.model_name;
  warned_name_.assign(engines_.size(), std::string());
  warned_shape_.assign(engines_.size(), false);
  connect(where, options);

  loads_.resize(engines_.size());
  failing_since_.resize(engines_.size());
  was_draining_.assign(engines_.size(), false);
  counted_.resize(engines_.size());
  counted_known_.assign(engines_.size(), false);
  for (size_t e = 0; e < engines_.size(); ++e) {
    const EngineProcess& engine = *engines_[e];
    forwarded_plugins_.emplace_back(metrics_, engine.index(), engine.pool(), engine.address());
    loads_[e] = engine.load();
    // The counts each process made before this router started are not this router's: its
    // counters start from 0, as its own series do (Prometheus takes a router's restart as a reset).
    if (engine.up()) {
      counted_[e] = engine.summary();
      forwarded_plugins_[e].take(engine.plugin_metrics(), /*baseline=*/true);
      counted_known_[e] = true;
    }
  }
  router_host_ = std::make_unique<core::HostServices>(
      "router " + deployment.router.plugin->short_name(), &clock_);
  router_host_->export_metrics(
      &metrics_.plugin("", "", "router", deployment.router.plugin->short_name()));
  // 0s (unbounded) for the processes that have not answered yet: route_now() tells the router
  // again as they do, or change.
  for (const auto& engine : engines_) told_limits_.push_back(engine->limits());
  limits_now_ = told_limits_;
  router_ = std::make_unique<core::RouterInstance>(deployment.router, loads_, *router_host_,
                                                   told_limits_);
  // The processes' KV events from their next poll on (those polled before are read then too,
  // as far as each process keeps them).
  if (router_->reads_kv_events()) {
    for (const auto& engine : engines_) engine->read_kv_events();
  }
  ModelSummary served;
  served.name = options.model_name;
  served.vocab = reference_model_.vocab;
  served.layers = reference_model_.layers;  // its ModelInfo says the shape, as a process does
  served.kv_heads = reference_model_.kv_heads;
  served.head_dim = reference_model_.head_dim;
  // A router that places requests by length (ABI 1.7) admits up to the largest max_model_len of
  // the processes that answered and finish requests (a prefill process hands its requests on);
  // one that does not, up to the smallest, which any process holds. (Cluster does the same.)
  uint32_t smallest = UINT32_MAX, largest = 0;
  for (const auto& engine : engines_) {
    if (const std::optional<ModelSummary> model = engine->model()) {
      smallest = std::min(smallest, model->max_model_len);
      if (engine->role() != HW_ENGINE_ROLE_PREFILL) {
        largest = std::max(largest, model->max_model_len);
      }
      served.samples_on_host = served.samples_on_host && model->samples_on_host;
      served.reads_token_ids = served.reads_token_ids && model->reads_token_ids;
      served.reports_prompt_logprobs =
          served.reports_prompt_logprobs && model->reports_prompt_logprobs;
    }
  }
  served.max_model_len = router_->reads_model_lengths() && largest > 0 ? largest : smallest;
  admission_ = std::make_unique<RequestAdmission>(deployment, std::move(served));
  if (admission_->model().tokenizer != reference_model_.tokenizer) {
    throw core::Error(
        fmt::format("{}: the router's checkpoint has a {} tokenizer, the engine "
                    "processes use {}: point [model] at their checkpoint",
                    where, admission_->model().tokenizer, reference_model_.tokenizer));
  }

  {
    std::lock_guard lock(link_->mutex);
    link_->service = this;
  }
  poller_ = std::thread([this] { poll_loop(); });
}

void RemoteGenerationService::Impl::warn_if_named_otherwise(const EngineProcess& engine,
                                                            const ModelSummary& model) {
  // Names alone do not refuse a process: a router may read a copy of the checkpoint's tokenizer
  // under another directory name. But two fine-tunes of one base share vocabulary and tokenizer,
  // and their directory names are what tells them apart.
  std::string& warned = warned_name_[engine.index()];
  if (!own_checkpoint_ || model.name == own_name_ || model.name == warned) return;
  warned = model.name;
  spdlog::warn(
      "engine{} at {} serves model '{}' and this router '{}' (each is named after its checkpoint "
      "directory unless named otherwise): check that they read the same checkpoint",
      engine.index(), engine.address(), model.name, own_name_);
}

std::string RemoteGenerationService::Impl::kv_shape_refusal(const EngineProcess& engine,
                                                            const ModelSummary& model) {
  if (model.layers == 0) return {};
  if (engine.role() != HW_ENGINE_ROLE_MIXED) {
    if (kv_reference_name_.empty()) {
      kv_reference_model_ = model;
      kv_reference_name_ = fmt::format("engine{} at {}", engine.index(), engine.address());
    }
    if (same_kv_shape(model, kv_reference_model_)) return {};
    return fmt::format(
        "has a model of {} and {} one of {}: KV moves between the prefill and decode processes, "
        "so they must serve one model",
        kv_shape_label(model), kv_reference_name_, kv_shape_label(kv_reference_model_));
  }
  if (warned_shape_[engine.index()] || same_kv_shape(model, reference_model_)) return {};
  warned_shape_[engine.index()] = true;
  spdlog::warn(
      "engine{} at {} serves a model of {}, the first process that answered one of {}: each "
      "request's answer depends on the process that serves it; check that they read the same "
      "checkpoint",
      engine.index(), engine.address(), kv_shape_label(model), kv_shape_label(reference_model_));
  return {};
}

void RemoteGenerationService::Impl::connect(const std::string& where,
                                            const RemoteServiceOptions& options) {
  const double timeout_s = options.connect_timeout_s;
  const Clock::time_point deadline = Clock::now() + milliseconds(timeout_s);
  const std::chrono::milliseconds call_deadline = poll_deadline(interval_s_);
  const auto stopping = [&] {
    return options.stop_connecting != nullptr && options.stop_connecting->load();
  };
  spdlog::info("waiting up to {} s for {} engine process{} to answer", timeout_s, engines_.size(),
               engines_.size() == 1 ? "" : "es");
  for (;;) {
    bool all_up = true;
    for (auto& engine : engines_) {
      if (!engine->up()) all_up = engine->poll(call_deadline) && all_up;
    }
    if (all_up || Clock::now() >= deadline || stopping()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (stopping()) {
    throw core::Error(
        fmt::format("{}: asked to stop while waiting for the engine processes", where));
  }
  std::string reasons;
  const EngineProcess* reference = nullptr;  // the first process that answered
  for (auto& engine : engines_) {
    const std::optional<ModelSummary> model = engine->model();
    if (engine->up() && model) {
      // The router's checkpoint decides, where it says: not whichever process answered first.
      if (own_vocab_ && model->vocab != *own_vocab_) {
        throw core::Error(fmt::format(
            "{}: engine{} at {} serves a model with a vocabulary of {}, and the router's "
            "checkpoint ([model] path) one of {}: point them at the same checkpoint",
            where, engine->index(), engine->address(), model->vocab, *own_vocab_));
      }
      warn_if_named_otherwise(*engine, *model);
      if (reference == nullptr) {
        reference = engine.get();
        reference_model_ = *model;
      }
      if (!same_model(*model, reference_model_)) {
        throw core::Error(fmt::format(
            "{}: the engine processes serve different models: engine{} at {} has {}; engine{} "
            "at {} has {}",
            where, engine->index(), engine->address(), model_label(*model), reference->index(),
            reference->address(), model_label(reference_model_)));
      }
      if (std::string refusal = kv_shape_refusal(*engine, *model); !refusal.empty()) {
        throw core::Error(fmt::format("{}: engine{} at {} {}", where, engine->index(),
                                      engine->address(), refusal));
      }
      // The poller logs transitions from here on; a process up at the start is one too.
      spdlog::info("engine{} at {} is up", engine->index(), engine->address());
    } else {
      reasons += fmt::format("\n  engine{} at {}: {}", engine->index(), engine->address(),
                             engine->down_reason());
    }
  }
  if (reference == nullptr) {
    throw core::Error(
        fmt::format("{}: no engine process answered within {} s:{}", where, timeout_s, reasons),
        HW_UNAVAILABLE);
  }
  if (!reasons.empty()) {
    spdlog::warn("{}: serving without these engine processes until they answer:{}", where, reasons);
  }
}

RemoteGenerationService::Impl::~Impl() {
  {
    std::lock_guard lock(link_->mutex);
    link_->service = nullptr;
  }
  {
    std::unique_lock lock(mutex_);
    admitting_ = false;
    cancel_all(lock);
  }
  {
    std::lock_guard lock(poller_mutex_);
    poller_stop_ = true;
  }
  poller_wake_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void RemoteGenerationService::Impl::give_up_calls_to(uint32_t engine) {
  // A process that stopped answering (frozen, partitioned) would otherwise hold its streams
  // until each client gave up: gRPC calls have no deadline here, generations are long.
  std::vector<std::shared_ptr<ProxiedGenerate>> calls;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, call] : calls_) {
      if (call->engine_index() == engine) calls.push_back(call);
    }
    for (const auto& [address, call] : leaving_) {
      if (call->engine_index() == engine) calls.push_back(call);
    }
  }
  for (const auto& call : calls) call->give_up();
}

void RemoteGenerationService::Impl::cancel_all(std::unique_lock<std::mutex>& lock) {
  cancelling_ = true;  // from now on no retry or continuation replaces a call being cancelled
  std::vector<std::shared_ptr<ProxiedGenerate>> calls;
  for (const auto& [id, call] : calls_) calls.push_back(call);
  for (const auto& [address, call] : leaving_) calls.push_back(call);
  for (const auto& call : calls) call->mark_cancelled(AbortCause::kShutdown);
  lock.unlock();
  for (const auto& call : calls) call->cancel(AbortCause::kShutdown);
  lock.lock();
  emptied_.wait(lock, [&] { return calls_.empty() && leaving_.empty(); });
}

void RemoteGenerationService::Impl::poll_loop() {
  std::unique_lock lock(poller_mutex_);
  while (!poller_stop_) {
    lock.unlock();
    poll_once();
    lock.lock();
    poller_wake_.wait_for(lock, milliseconds(interval_s_), [&] { return poller_stop_; });
  }
}

void RemoteGenerationService::Impl::poll_once() {
  const std::chrono::milliseconds deadline = poll_deadline(interval_s_);
  for (size_t e = 0; e < engines_.size(); ++e) {
    EngineProcess& engine = *engines_[e];
    const bool was_up = engine.up();
    const std::string reason_before = engine.down_reason();
    // A process that answers but cannot serve what the router admits stays out.
    std::string refused;
    const bool up = engine.poll(deadline, [&](const ModelSummary& model) {
      warn_if_named_otherwise(engine, model);
      if (!same_model(model, reference_model_)) {
        refused = fmt::format("serves a different model ({}) than the others ({})",
                              model_label(model), model_label(reference_model_));
      } else if (std::string shape = kv_shape_refusal(engine, model); !shape.empty()) {
        refused = std::move(shape);
      } else if (admission_ && !router_->reads_model_lengths() &&
                 model.max_model_len < admission_->model().max_model_len) {
        refused = fmt::format(
            "serves max_model_len {}, less than the {} this router admits (set when it started "
            "from the processes that answered), and router '{}' places requests without reading "
            "the engines' lengths (built before ABI 1.7): give every engine process the same "
            "max_model_len",
            model.max_model_len, admission_->model().max_model_len, router_->name());
      } else if (admission_ && admission_->model().samples_on_host && !model.samples_on_host) {
        refused =
            "samples on its device, and this router admits the logits processing and logprobs "
            "(set when it started from the processes that answered)";
      } else if (admission_ && admission_->model().reads_token_ids && !model.reads_token_ids) {
        refused =
            "reads no token ids, and this router admits the penalties and bad_words (set when it "
            "started from the processes that answered)";
      } else if (admission_ && admission_->model().reports_prompt_logprobs &&
                 !model.reports_prompt_logprobs) {
        refused =
            "does not report prompt log-probabilities (its model writes no logits row per prompt "
            "position, or it predates them), and this router admits prompt_logprobs (set when it "
            "started from the processes that answered)";
      }
      return refused;
    });
    // Said once, when it is new: a process that was down already logs no transition below.
    if (!refused.empty() && !was_up && refused != reason_before) {
      spdlog::warn("engine{} at {} answers again but stays out: it {}", engine.index(),
                   engine.address(), refused);
    }
    const bool draining = !up && engine.draining();
    if (up != was_up || draining != was_draining_[e]) {
      if (up) {
        spdlog::info("engine{} at {} is up", engine.index(), engine.address());
      } else if (draining) {
        spdlog::info("engine{} at {} is draining: it gets no new request and finishes its own",
                     engine.index(), engine.address());
      } else {
        spdlog::warn("engine{} at {} is down: {}", engine.index(), engine.address(),
                     engine.down_reason());
      }
    }
    was_draining_[e] = draining;
    // Its calls are given up only once it has failed every poll for kGiveUpAfter: a busy process
    // that misses one deadline stops getting new requests but keeps its streams. From then on at
    // every poll, so that a call sent to it since (a hand-off sent there anyway) cannot wait on it
    // forever either. A draining process answers its polls: its streams are not given up (it ends
    // them itself when its drain does).
    if (up || draining) {
      failing_since_[e].reset();
    } else if (!failing_since_[e]) {
      failing_since_[e] = Clock::now();
    } else if (Clock::now() - *failing_since_[e] >= kGiveUpAfter) {
      give_up_calls_to(engine.index());
    }
    add_engine_counts(e);
    set_engine_gauges(e);
  }
}

void RemoteGenerationService::Impl::add_engine_counts(size_t e) {
  const EngineProcess& engine = *engines_[e];
  if (!engine.up() && !engine.draining()) {  // its counts come with its next answer
    forwarded_plugins_[e].process_down();
    return;
  }
  const EngineSummary now = engine.summary();
  EngineSummary& before = counted_[e];
  // A process that restarted counts from 0 again: all of its new count is new. Known from its
  // incarnation; from a build before it, guessed from a count that fell (a restarted process that
  // passed its old count before the next poll is undercounted by that count).
  const bool restarted =
      counted_known_[e] && before.incarnation != 0 && now.incarnation != before.incarnation;
  if (restarted) before.preemptions = before.prefix_cache_queries = before.prefix_cache_hits = 0;
  // On its first answer since the router started, what it reports was counted before the router.
  forwarded_plugins_[e].take(engine.plugin_metrics(), /*baseline=*/!counted_known_[e], restarted);
  if (!counted_known_[e]) {
    before = now;
    counted_known_[e] = true;
    return;
  }
  before.incarnation = now.incarnation;
  EngineSeries& series = engine_series_[e];
  const auto grow = [](Counter& counter, uint64_t now_count, uint64_t& before_count) {
    counter.add(
        static_cast<double>(now_count >= before_count ? now_count - before_count : now_count));
    before_count = now_count;
  };
  grow(series.preemptions, now.preemptions, before.preemptions);
  grow(series.prefix_cache_queries, now.prefix_cache_queries, before.prefix_cache_queries);
  grow(series.prefix_cache_hits, now.prefix_cache_hits, before.prefix_cache_hits);
}

void RemoteGenerationService::Impl::set_engine_gauges(size_t e) const {
  const EngineProcess& engine = *engines_[e];
  EngineSeries& series = engine_series_[e];
  series.alive.set(engine.up() ? 1.0 : 0.0);
  // A process that is down (not draining) reports nothing: its last figures would add load that
  // no process carries to a dashboard's sums.
  const EngineSummary summary =
      engine.up() || engine.draining() ? engine.summary() : EngineSummary{};
  series.running.set(summary.running);
  series.waiting.set(summary.waiting);
  series.kv_usage.set(summary.kv_blocks_total == 0
                          ? 0.0
                          : 1.0 - static_cast<double>(summary.kv_blocks_free) /
                                      static_cast<double>(summary.kv_blocks_total));
}

std::shared_ptr<RequestStream> RemoteGenerationService::Impl::submit(GenerateInput input) {
  const Clock::time_point arrival = Clock::now();
  if (!admitting_) {
    throw rejected(
        Rejection::kUnavailable,
        ServiceError(ErrorCode::kUnavailable, "the server is draining and admits no new requests"));
  }
  AdmittedRequest admitted;
  try {
    // The router sets these itself on the calls it makes; from a client they are refused, as by
    // a single process.
    refuse_handoff_fields(input);
    admitted = admission_->admit(input);
  } catch (const ServiceError& e) {
    throw rejected(Rejection::kInvalid, e);
  }
  std::unique_ptr<IncrementalDecoder> decoder =
      admission_->decoder(input, admitted.prompt, input.sampling.min_tokens);
  const uint32_t prompt_tokens = static_cast<uint32_t>(admitted.prompt.size());
  // Before the lock: hashing a long prompt takes a while, and every request waits on the lock.
  std::vector<uint64_t> prefix_hashes;
  if (hashes_prefixes()) core::route_prefix_hashes(admitted.prompt, prefix_hashes);

  std::shared_ptr<ProxiedGenerate> call;
  {
    std::lock_guard lock(mutex_);
    if (!admitting_) {
      throw rejected(Rejection::kUnavailable,
                     ServiceError(ErrorCode::kUnavailable,
                                  "the server is draining and admits no new requests"));
    }
    std::string id = std::move(input.request_id);
    if (id.empty()) {
      do {
        id = random_request_id("req-");
      } while (calls_.count(id) != 0);
    } else if (calls_.count(id) != 0) {
      throw rejected(
          Rejection::kInvalid,
          ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("request id {} is already in flight", quote_input(id)),
                       "request_id"));
    }
    const uint64_t numeric_id = next_numeric_id_++;
    hw_route_decision decision{};
    const auto routing = std::chrono::steady_clock::now();
    try {
      decision = route_now(numeric_id, prompt_tokens, prefix_hashes,
                           routed_output_tokens(input.max_tokens_to_context_end, input.max_tokens,
                                                input.sampling.min_tokens, 0),
                           input.priority, admitted.request_class);
    } catch (const core::Error& e) {
      router_watch_.routed(std::chrono::steady_clock::now() - routing, id, router_->name());
      auto [why, error] = router_watch_.failed(e, id, "engine process");
      throw rejected(why, std::move(error));
    }
    router_watch_.routed(std::chrono::steady_clock::now() - routing, id, router_->name());
    // Inside the deployment: RouterInstance::route() refuses a decision naming an engine it has
    // not.
    // Disaggregated: the prefill process stages the KV, the decode process continues from it.
    const bool disaggregated = decision.decode_engine != decision.prefill_engine;
    EngineProcess& engine = *engines_[decision.prefill_engine];
    for (const uint32_t chosen : {decision.prefill_engine, decision.decode_engine}) {
      const EngineProcess& process = *engines_[chosen];
      if (!process.up()) {
        throw rejected(
            Rejection::kUnavailable,
            ServiceError(
                ErrorCode::kUnavailable,
                fmt::format("engine{} at {} (chosen by router '{}') is down: {}", process.index(),
                            process.address(), router_->name(), process.down_reason())));
      }
    }
    if (input.max_tokens_to_context_end) {
      input.max_tokens = open_ended_max_tokens(prompt_tokens, input.max_tokens,
                                               {decision.prefill_engine, decision.decode_engine});
    }
    // The stop-string callback cancels this stream's call only, not a later request that reused
    // the client's id.
    std::weak_ptr<Link> link = link_;
    auto stream_holder = std::make_shared<const RequestStream*>(nullptr);
    auto on_stop_string = [link, stream_holder](const std::string& stream_id) {
      if (auto shared = link.lock()) {
        std::lock_guard link_lock(shared->mutex);
        if (shared->service != nullptr)
          shared->service->abort(stream_id, AbortCause::kStopString, *stream_holder);
      }
    };
    // Admitted once an engine process accepts it: until then it may still be refused (a full
    // queue), and an HTTP frontend holds the stream's 200 so that the refusal gets its status.
    auto stream = std::make_shared<RequestStream>(id, prompt_tokens, std::move(decoder),
                                                  std::move(on_stop_string), /*admitted=*/false);
    if (input.return_prompt_ids) stream->set_prompt_ids(admitted.prompt);
    stream->set_prompt_reasoning(admitted.prompt_reasoning);
    if (input.sampling.prompt_logprobs >= 0 && !admitted.prompt.empty()) {
      stream->expect_prompt_logprobs(admitted.prompt.front());
    }
    *stream_holder = stream.get();
    v1::GenerateRequest upstream = upstream_request(id, admitted, input);
    upstream.set_prefill_only(disaggregated);
    call = std::make_shared<ProxiedGenerate>(
        *this, engine, engine_series_[engine.index()],
        metrics_.request(engine.index(), engine.pool(), admitted.request_class), stream,
        std::move(upstream), arrival,
        disaggregated ? decision.decode_engine : ProxiedGenerate::kNoEngine);
    if (disaggregated) call->expect_at_decode(*engines_[decision.decode_engine]);
    call->set_open_ended(input.max_tokens_to_context_end);
    calls_.emplace(id, call);
    engine.sent(prompt_tokens, input.max_tokens);
  }
  std::shared_ptr<RequestStream> stream = call->stream();
  call->start(call);
  return stream;
}

bool RemoteGenerationService::Impl::abort(const std::string& request_id, AbortCause cause,
                                          const RequestStream* only) {
  std::shared_ptr<ProxiedGenerate> call;
  {
    std::lock_guard lock(mutex_);
    auto it = calls_.find(request_id);
    if (it == calls_.end()) return false;
    if (only != nullptr && it->second->stream().get() != only) return false;  // id reused since
    // Out of calls_ under the lock: the id is free again, and no retry or continuation takes the
    // call's place from now on.
    call = it->second;
    leaving_.emplace(call.get(), call);
    calls_.erase(it);
    call->mark_cancelled(cause);
  }
  call->cancel(cause);
  return true;
}

bool RemoteGenerationService::Impl::retry_elsewhere(ProxiedGenerate& failed, bool busy) {
  std::shared_ptr<ProxiedGenerate> call;
  {
    std::lock_guard lock(mutex_);
    auto it = calls_.find(failed.id());
    // Not refused while draining: the request was admitted before the drain began, and the
    // drain waits for it wherever it runs.
    if (cancelling_ || failed.cancelled() || it == calls_.end() || it->second.get() != &failed) {
      return false;
    }
    // Full queues everywhere: each process is tried about once, then the client gets the 429
    // (bouncing between full processes would only load them more).
    if (busy && failed.attempts() >= engines_.size()) return false;
    const v1::GenerateRequest& upstream = failed.upstream();
    const std::optional<hw_route_decision> routed = route_again(
        upstream, failed.open_ended(), static_cast<uint32_t>(upstream.generated_ids_size()));
    if (!routed) return false;  // no other process can take it: the client gets the failure
    const hw_route_decision& decision = *routed;
    // Sent again as it was: a prefill_only call to another prefill process, keeping its decode
    // process; a continuation to another decode process, which reads the staged KV (or prefills
    // the tokens itself when it cannot). A prefill_only call whose new process is the one that
    // would decode it (the router falls back to it when no prefill process is up) runs there
    // whole: sent prefill_only, it staged its KV and read it back into itself.
    const bool continuation = !upstream.generated_ids().empty();
    const uint32_t target = continuation ? decision.decode_engine : decision.prefill_engine;
    if (target >= engines_.size() || target == failed.engine_index() || !engines_[target]->up() ||
        (!continuation && decision.decode_engine != decision.prefill_engine &&
         !upstream.prefill_only())) {
      return false;
    }
    const bool whole_there = !continuation && upstream.prefill_only() &&
                             (target == failed.decode_engine() || target == decision.decode_engine);
    EngineProcess& engine = *engines_[target];
    const EngineProcess& dead = *engines_[failed.engine_index()];
    retries_.with({std::to_string(dead.index()), dead.pool()}).add();
    // A full queue is routine under load: not a warning each time.
    spdlog::log(busy ? spdlog::level::debug : spdlog::level::warn,
                "request \"{}\": engine{} at {} {} before its first token; retrying on engine{} "
                "at {}",
                failed.id(), failed.engine_index(), dead.address(),
                busy ? "had a full queue" : "was unreachable", engine.index(), engine.address());
    v1::GenerateRequest request = upstream;
    if (whole_there) request.set_prefill_only(false);
    if (failed.open_ended()) {
      // To the end of the context of where it goes now (never past where it was sent before).
      const uint32_t decode = continuation || whole_there ? target : failed.decode_engine();
      request.mutable_sampling()->set_max_tokens(
          open_ended_max_tokens(static_cast<uint32_t>(upstream.token_ids().ids_size()),
                                upstream.sampling().max_tokens(), {target, decode}));
    }
    call = std::make_shared<ProxiedGenerate>(
        *this, engine, engine_series_[engine.index()],
        metrics_.request(engine.index(), engine.pool(), upstream.request_class()), failed.stream(),
        std::move(request), failed.arrival(),
        whole_there ? ProxiedGenerate::kNoEngine : failed.decode_engine());
    if (!continuation && !whole_there && failed.decode_engine() < engines_.size()) {
      call->expect_at_decode(*engines_[failed.decode_engine()]);
    }
    if (!upstream.generated_ids().empty()) call->continues(failed);
    call->set_attempts(failed.attempts() + 1);
    call->set_open_ended(failed.open_ended());
    it->second = call;
    engine.sent(static_cast<uint32_t>(upstream.token_ids().ids_size()),
                call->upstream().sampling().max_tokens());
  }
  call->start(call);
  return true;
}

hw_route_decision RemoteGenerationService::Impl::route_now(uint64_t numeric_id,
                                                           uint32_t prompt_tokens,
                                                           std::span<const uint64_t> prefix_hashes,
                                                           uint32_t max_tokens, int32_t priority,
                                                           std::string_view request_class) {
  bool limits_changed = false;
  for (size_t e = 0; e < engines_.size(); ++e) {
    loads_[e] = engines_[e]->load();
    limits_now_[e] = engines_[e]->limits();
    limits_changed = limits_changed || limits_now_[e].max_waiting != told_limits_[e].max_waiting ||
                     limits_now_[e].max_model_len != told_limits_[e].max_model_len;
  }
  if (limits_changed) {
    router_->set_engine_limits(limits_now_);
    told_limits_ = limits_now_;  // same size: no allocation
  }
  if (router_->reads_kv_events()) {
    for (size_t e = 0; e < engines_.size(); ++e) {
      kv_events_.clear();
      const auto index = static_cast<uint32_t>(e);
      if (engines_[e]->take_kv_events(kv_events_)) router_->kv_events(index, {});
      if (!kv_events_.empty()) router_->kv_events(index, kv_events_);
    }
  }
  const hw_route_request route{numeric_id, prompt_tokens, max_tokens, priority,
                               hw_str{request_class.data(), request_class.size()}};
  return router_->route(route, loads_, prefix_hashes);
}

std::optional<hw_route_decision> RemoteGenerationService::Impl::route_again(
    const v1::GenerateRequest& upstream, bool open_ended, uint32_t generated) {
  try {
    const auto& ids = upstream.token_ids().ids();
    prefix_hashes_.clear();
    if (hashes_prefixes()) {
      core::route_prefix_hashes(std::span<const int32_t>(ids.data(), ids.size()), prefix_hashes_);
    }
    return route_now(next_numeric_id_++, static_cast<uint32_t>(ids.size()), prefix_hashes_,
                     routed_output_tokens(open_ended, upstream.sampling().max_tokens(),
                                          upstream.sampling().min_tokens(), generated),
                     upstream.priority(), upstream.request_class());
  } catch (const core::Error&) {
    return std::nullopt;
  }
}

uint32_t RemoteGenerationService::Impl::routed_output_tokens(bool open_ended, uint32_t max_tokens,
                                                             uint32_t min_tokens,
                                                             uint32_t generated) const {
  // A router that knows no lengths has every process hold what is admitted: it is told
  // max_tokens as before, which it may read as the decode work to come.
  if (!open_ended || !router_->reads_model_lengths()) return max_tokens;
  return std::max({1u, min_tokens, generated + 1});
}

uint32_t RemoteGenerationService::Impl::open_ended_max_tokens(
    uint32_t prompt_tokens, uint32_t max_tokens, std::initializer_list<uint32_t> processes) const {
  // As the router was told them (limits_now_, what RouterInstance checked the placement against),
  // not as a poll may have changed them since; 0: not known.
  for (const uint32_t e : processes) {
    const uint32_t length = e < limits_now_.size() ? limits_now_[e].max_model_len : 0;
    if (length > prompt_tokens) max_tokens = std::min(max_tokens, length - prompt_tokens);
  }
  return max_tokens;
}

bool RemoteGenerationService::Impl::continue_elsewhere(ProxiedGenerate& prefilled,
                                                       const KvStage& stage) {
  std::shared_ptr<ProxiedGenerate> call;
  {
    std::lock_guard lock(mutex_);
    auto it = calls_.find(prefilled.id());
    uint32_t d = prefilled.decode_engine();
    if (d < engines_.size() && !engines_[d]->up()) {
      // The decode process chosen at admission is down now, perhaps only late for two polls:
      // another live one takes the request if the plugin finds one, else it is sent there anyway
      // (a dead process fails the call, which is then retried elsewhere), rather than throwing
      // the finished prefill away.
      const std::optional<hw_route_decision> routed =
          route_again(prefilled.upstream(), prefilled.open_ended(),
                      static_cast<uint32_t>(prefilled.generated().size()));
      // A decision to prefill there too (the disaggregated router's local_prefill_where_cached,
      // for an engine that holds the prompt's beginning) still names an engine that decodes it.
      if (routed && routed->decode_engine < engines_.size() &&
          engines_[routed->decode_engine]->up() &&
          engines_[routed->decode_engine]->role() != HW_ENGINE_ROLE_PREFILL) {
        d = routed->decode_engine;
      }
    }
    if (cancelling_ || it == calls_.end() || it->second.get() != &prefilled ||
        prefilled.cancelled() || d >= engines_.size()) {
      // Nobody will read the staged KV.
      KvStage unread = stage;
      unread.source_address = prefilled.engine_address();
      discard_stage(unread);
      return false;
    }
    EngineProcess& engine = *engines_[d];
    v1::GenerateRequest upstream = prefilled.upstream();
    upstream.set_prefill_only(false);
    if (prefilled.open_ended() && d != prefilled.decode_engine()) {
      upstream.mutable_sampling()->set_max_tokens(
          open_ended_max_tokens(static_cast<uint32_t>(upstream.token_ids().ids_size()),
                                upstream.sampling().max_tokens(), {d}));
    }
    // Its prompt's figures came with the prefill.
    upstream.mutable_sampling()->clear_prompt_logprobs();
    grpc_frontend::to_proto(stage, *upstream.mutable_kv_source());
    // Where a decode process on another host fetches it (kv_stage_socket.h).
    upstream.mutable_kv_source()->set_source_address(prefilled.engine_address());
    upstream.mutable_generated_ids()->Add(prefilled.generated().begin(),
                                          prefilled.generated().end());
    call = std::make_shared<ProxiedGenerate>(
        *this, engine, engine_series_[d],
        metrics_.request(engine.index(), engine.pool(), upstream.request_class()),
        prefilled.stream(), std::move(upstream), prefilled.arrival());
    call->continues(prefilled);
    call->set_open_ended(prefilled.open_ended());
    it->second = call;
    engine.sent(0, call->upstream().sampling().max_tokens());
  }
  call->start(call);
  return true;
}

void RemoteGenerationService::Impl::discard_stage(const KvStage& stage) {
  // A shared-memory stage is unlinked here: this router shares the host with the processes that
  // write them.
  abandon_kv_stage(stage, [this](const KvStage& held) {
    for (const std::unique_ptr<EngineProcess>& engine : engines_) {
      if (engine->address() == held.source_address) {
        drop_held_kv(*engine, held);
        return;
      }
    }
  });
}

void RemoteGenerationService::Impl::call_refused(const ProxiedGenerate& /*call*/, ErrorCode code) {
  metrics_.rejected(code == ErrorCode::kResourceExhausted ? Rejection::kQueueFull
                    : code == ErrorCode::kUnavailable     ? Rejection::kUnavailable
                    : code == ErrorCode::kInternal        ? Rejection::kInternal
                                                          : Rejection::kInvalid);
}

void RemoteGenerationService::Impl::call_done(const ProxiedGenerate& call) {
  std::lock_guard lock(mutex_);
  auto it = calls_.find(call.id());
  if (it != calls_.end() && it->second.get() == &call) {
    calls_.erase(it);
  } else {
    leaving_.erase(&call);
  }
  if (calls_.empty() && leaving_.empty()) emptied_.notify_all();
}

std::string RemoteGenerationService::Impl::metrics_text() const {
  // A process marked down by a failed call shows as such at once, not at the next poll.
  for (size_t e = 0; e < engines_.size(); ++e) set_engine_gauges(e);
  return metrics_.render();
}

ClusterSummary RemoteGenerationService::Impl::cluster_info() const {
  ClusterSummary summary;
  summary.deployment = deployment_name_;
  summary.router = router_->name();
  for (const auto& engine : engines_) summary.engines.push_back(engine->summary());
  return summary;
}

HealthSummary RemoteGenerationService::Impl::health() const {
  std::vector<EngineHealth> engines;
  for (const auto& engine : engines_) engines.push_back({engine->role(), engine->up()});
  return summarize_health(admitting_, engines);
}

size_t RemoteGenerationService::Impl::drain(double timeout_seconds) {
  admitting_ = false;
  std::unique_lock lock(mutex_);
  emptied_.wait_for(lock, milliseconds(std::max(0.0, timeout_seconds)),
                    [&] { return (calls_.empty() && leaving_.empty()) || drain_cut_short_; });
  const size_t left = calls_.size() + leaving_.size();
  cancel_all(lock);
  if (left > 0) {
    spdlog::warn("drain: {} requests still running {} were cancelled", left,
                 drain_cut_short_ ? std::string("when the drain was cut short")
                                  : fmt::format("after {} s", timeout_seconds));
  }
  return left;
}

RemoteGenerationService::RemoteGenerationService(const core::DeploymentConfig& deployment,
                                                 const RemoteServiceOptions& options)
    : impl_(std::make_unique<Impl>(deployment, options)) {}

RemoteGenerationService::~RemoteGenerationService() = default;

std::shared_ptr<RequestStream> RemoteGenerationService::submit(GenerateInput input) {
  return impl_->submit(std::move(input));
}
bool RemoteGenerationService::abort(const std::string& request_id) {
  return impl_->abort(request_id, AbortCause::kClient);
}
bool RemoteGenerationService::abort(const RequestStream& stream) {
  return impl_->abort(stream.id(), AbortCause::kClient, &stream);
}
ModelSummary RemoteGenerationService::model_info() const { return impl_->model_info(); }
std::vector<int32_t> RemoteGenerationService::tokenize(const GenerateInput& input) const {
  return impl_->admission().tokenize(input);
}
std::string RemoteGenerationService::detokenize(const std::string& model,
                                                std::span<const int32_t> ids) const {
  return impl_->admission().detokenize(model, ids);
}
ClusterSummary RemoteGenerationService::cluster_info() const { return impl_->cluster_info(); }
HealthSummary RemoteGenerationService::health() const { return impl_->health(); }
std::string RemoteGenerationService::metrics_text() const { return impl_->metrics_text(); }
ServiceTotals RemoteGenerationService::totals() const { return impl_->totals(); }
void RemoteGenerationService::count_refused_request() { impl_->count_refused_request(); }
void RemoteGenerationService::count_unauthorized_request() { impl_->count_unauthorized_request(); }
void RemoteGenerationService::end_drain_now() { impl_->end_drain_now(); }
size_t RemoteGenerationService::drain(double timeout_seconds) {
  return impl_->drain(timeout_seconds);
}

}  // namespace headway::serving
