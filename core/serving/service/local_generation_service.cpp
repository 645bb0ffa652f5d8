#include <fmt/format.h>
#include <headway/core/cluster.h>
#include <headway/core/error.h>
#include <headway/core/tokenizer.h>
#include <headway/serving/local_generation_service.h>
#include <headway/serving/metrics_serving.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "engine_driver.h"
#include "owning_decoder.h"
#include "prompt_encoder.h"
#include "request_validation.h"

namespace headway::serving {
namespace {

// Distinct request classes that get series of their own (see class_label()).
constexpr size_t kMaxClassLabels = 16;

ErrorCode code_of(hw_status_code code) {
  switch (code) {
    case HW_INVALID_ARGUMENT:
      return ErrorCode::kInvalidArgument;
    case HW_NOT_FOUND:
      return ErrorCode::kNotFound;
    case HW_RESOURCE_EXHAUSTED:
      return ErrorCode::kResourceExhausted;
    case HW_UNAVAILABLE:
      return ErrorCode::kUnavailable;
    default:
      return ErrorCode::kInternal;
  }
}

// The checkpoint directory the model reads (its `path` option), resolved like the plugin does:
// relative to the deployment file. Empty when the model has none (then only token ids are served).
std::filesystem::path checkpoint_dir(const core::DeploymentConfig& deployment) {
  for (const hw_option_value& v : deployment.model.options->values()) {
    if (std::string_view(v.key.data, v.key.size) != "path" || v.type != HW_OPTION_STRING) continue;
    std::filesystem::path dir(std::string(v.string_value.data, v.string_value.size));
    if (dir.empty()) return {};
    if (dir.is_relative() && deployment.file.has_parent_path()) {
      dir = deployment.file.parent_path() / dir;
    }
    return dir.lexically_normal();
  }
  return {};
}

std::string role_name(int32_t role) {
  switch (role) {
    case HW_ENGINE_ROLE_PREFILL:
      return "prefill";
    case HW_ENGINE_ROLE_DECODE:
      return "decode";
    default:
      return "both";
  }
}

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
  bool abort(const std::string& request_id, bool stop_string, uint64_t numeric_id = 0);
  ModelSummary model_info() const { return model_; }
  ClusterSummary cluster_info() const;
  HealthSummary health() const;
  std::string metrics_text() const { return metrics_.render(); }
  size_t drain(double timeout_seconds);
  size_t in_flight() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }

  void forget(std::span<const std::string> ids) override;

 private:
  struct Placement {
    uint32_t engine;
    uint64_t numeric_id;
  };
  std::string class_of(const GenerateInput& input) const;
  // The metrics label of a class: itself while fewer than kMaxClassLabels are known, else "other",
  // so that clients cannot grow the number of series without bound. Caller holds mutex_.
  const std::string& class_label(const std::string& request_class);
  ServiceError rejected(Rejection why, ServiceError error);
  void stop_drivers();

  const std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  const core::WallClock clock_{origin_};
  std::string deployment_name_;
  std::unique_ptr<core::Cluster> cluster_;
  std::shared_ptr<const core::Tokenizer> tokenizer_;
  std::unique_ptr<PromptEncoder> encoder_;
  ModelSummary model_;
  ServingMetrics metrics_;
  std::vector<std::unique_ptr<EngineDriver>> drivers_;  // destroyed before the cluster's engines
  std::shared_ptr<Link> link_ = std::make_shared<Link>();

  mutable std::mutex mutex_;  // guards what follows, and serialises routing
  std::condition_variable emptied_;
  std::unordered_map<std::string, Placement> requests_;
  std::vector<hw_engine_load> loads_;  // routing scratch
  std::set<std::string> class_labels_;
  uint64_t next_numeric_id_ = 1;
  uint64_t next_generated_id_ = 1;
  std::atomic<bool> admitting_{true};
};

LocalGenerationService::Impl::Impl(const core::DeploymentConfig& deployment,
                                   LocalServiceOptions options)
    : deployment_name_(deployment.name) {
  const std::string where = deployment.file.string();
  if (deployment.kv_transport) {
    throw core::Error(where +
                      ": prefill/decode disaggregated deployments ([kv_transport]) cannot be "
                      "served in-process yet; `headway simulate` runs them");
  }
  for (const core::EngineConfig& engine : deployment.engines) {
    if (engine.role != HW_ENGINE_ROLE_MIXED) {
      throw core::Error(
          fmt::format("{}: {} has role {}: only mixed engines can be served "
                      "in-process yet",
                      where, engine.name, role_name(engine.role)));
    }
  }
  cluster_ = std::make_unique<core::Cluster>(deployment, origin_);
  if (cluster_->is_virtual()) {
    throw core::Error(fmt::format(
        "{}: model '{}' reports step durations (a simulated model on the virtual clock); serve a "
        "model that runs on the wall clock, e.g. plugin = \"cpu\"",
        where, deployment.model.plugin->short_name()));
  }

  uint32_t max_model_len = UINT32_MAX;
  for (size_t e = 0; e < cluster_->size(); ++e) {
    max_model_len = std::min(max_model_len, cluster_->engine(e).max_model_len());
  }
  const hw_model_info& info = cluster_->engine(0).model_info();
  const std::filesystem::path dir = checkpoint_dir(deployment);
  if (!dir.empty()) {
    tokenizer_ = core::Tokenizer::load(dir);
    if (tokenizer_->vocab_size() > info.vocab) {
      throw core::Error(
          fmt::format("{}: the tokenizer of {} has {} tokens, more than the model's "
                      "vocabulary of {}",
                      where, dir.string(), tokenizer_->vocab_size(), info.vocab));
    }
  }
  encoder_ = std::make_unique<PromptEncoder>(tokenizer_, dir);
  model_.name = options.model_name;
  if (model_.name.empty()) model_.name = dir.empty() ? deployment.name : dir.filename().string();
  model_.max_model_len = max_model_len;
  model_.vocab = info.vocab;
  model_.tokenizer = tokenizer_ ? std::string(tokenizer_->kind()) : std::string("none");

  loads_.resize(cluster_->size());
  {
    std::lock_guard lock(link_->mutex);
    link_->service = this;
  }
  for (size_t e = 0; e < cluster_->size(); ++e) {
    core::Engine& engine = cluster_->engine(e);
    drivers_.push_back(std::make_unique<EngineDriver>(
        engine, metrics_.engine(engine.config().index, engine.config().pool), *this));
  }
  for (auto& driver : drivers_) driver->start();
}

LocalGenerationService::Impl::~Impl() {
  {
    std::lock_guard lock(link_->mutex);
    link_->service = nullptr;
  }
  stop_drivers();
}

void LocalGenerationService::Impl::stop_drivers() {
  {
    // Under the mutex: a submit() that saw admitting_ true holds it until its request is in a
    // driver's inbox, so every admitted request is in an inbox before its driver's last swap (set
    // without the lock, a submit racing this could enqueue into a driver whose thread had exited,
    // and its stream would never finish).
    std::lock_guard lock(mutex_);
    admitting_ = false;
  }
  // Each driver aborts what it still serves (the streams finish kAbort) before its thread ends.
  for (auto& driver : drivers_) driver->stop();
}

ServiceError LocalGenerationService::Impl::rejected(Rejection why, ServiceError error) {
  metrics_.rejected(why);
  return error;
}

std::string LocalGenerationService::Impl::class_of(const GenerateInput& input) const {
  if (!input.request_class.empty()) return input.request_class;
  return input.prompt_kind == GenerateInput::PromptKind::kChat ? "chat" : "completion";
}

const std::string& LocalGenerationService::Impl::class_label(const std::string& request_class) {
  static const std::string kOther = "other";
  auto it = class_labels_.find(request_class);
  if (it != class_labels_.end()) return *it;
  if (class_labels_.size() >= kMaxClassLabels) return kOther;
  return *class_labels_.insert(request_class).first;
}

std::shared_ptr<RequestStream> LocalGenerationService::Impl::submit(GenerateInput input) {
  if (!admitting_) {
    throw rejected(
        Rejection::kUnavailable,
        ServiceError(ErrorCode::kUnavailable, "the server is draining and admits no new requests"));
  }
  std::vector<int32_t> prompt;
  std::string request_class;
  try {
    if (!input.model.empty() && input.model != model_.name) {
      throw ServiceError(ErrorCode::kNotFound,
                         fmt::format("model \"{}\" is not served here (this server serves \"{}\")",
                                     input.model, model_.name),
                         "model");
    }
    validate_prompt_form(input);
    validate_sampling(input, model_.vocab);
    if (!input.request_class.empty()) validate_request_class(input.request_class);
    request_class = class_of(input);
    if (!input.stop.empty() && tokenizer_ == nullptr) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         "stop strings need a tokenizer, and this model has none", "stop");
    }
    prompt = encoder_->encode(input);
    validate_token_ids(prompt, model_.vocab, "prompt");
    if (input.max_tokens_to_context_end && prompt.size() < model_.max_model_len) {
      input.max_tokens = model_.max_model_len - static_cast<uint32_t>(prompt.size());
    }
    validate_length(static_cast<uint32_t>(std::min<size_t>(prompt.size(), UINT32_MAX)),
                    input.max_tokens, model_.max_model_len);
  } catch (const ServiceError& e) {
    throw rejected(Rejection::kInvalid, e);
  }

  std::unique_ptr<IncrementalDecoder> decoder;
  if (tokenizer_) decoder = make_decoder(tokenizer_, std::move(input.stop));

  core::NewRequest request;
  request.max_output_tokens = input.max_tokens;
  request.priority = input.priority;
  request.sampling = std::move(input.sampling);
  const uint32_t prompt_tokens = static_cast<uint32_t>(prompt.size());
  request.prompt_tokens = prompt_tokens;
  request.prompt = std::move(prompt);

  std::lock_guard lock(mutex_);
  if (!admitting_) {
    throw rejected(
        Rejection::kUnavailable,
        ServiceError(ErrorCode::kUnavailable, "the server is draining and admits no new requests"));
  }
  std::string id = std::move(input.request_id);
  if (id.empty()) {
    do {
      id = fmt::format("req-{}", next_generated_id_++);
    } while (requests_.count(id) != 0);
  } else if (requests_.count(id) != 0) {
    throw rejected(
        Rejection::kInvalid,
        ServiceError(ErrorCode::kInvalidArgument,
                     fmt::format("request id \"{}\" is already in flight", id), "request_id"));
  }
  request.id = next_numeric_id_++;
  // The stop-string callback targets this request's numeric id, not just its client id: the
  // consumer may see the stop string after this request finished and a new one reused the id.
  std::weak_ptr<Link> link = link_;
  auto on_stop_string = [link, numeric_id = request.id](const std::string& id) {
    if (auto shared = link.lock()) {
      std::lock_guard lock(shared->mutex);
      if (shared->service != nullptr) shared->service->abort(id, /*stop_string=*/true, numeric_id);
    }
  };
  for (size_t e = 0; e < drivers_.size(); ++e) loads_[e] = drivers_[e]->load();
  hw_route_decision decision{};
  const hw_route_request route{request.id, prompt_tokens, request.max_output_tokens,
                               request.priority,
                               hw_str{request_class.data(), request_class.size()}};
  try {
    decision = cluster_->route(route, loads_);
  } catch (const core::Error& e) {
    throw rejected(Rejection::kUnavailable,
                   ServiceError(code_of(e.code()), fmt::format("no engine can take request \"{}\": "
                                                               "{}",
                                                               id, e.what())));
  }
  const uint32_t e = decision.prefill_engine;
  EngineDriver& driver = *drivers_[e];
  if (!driver.alive()) {
    throw rejected(Rejection::kUnavailable,
                   ServiceError(ErrorCode::kUnavailable,
                                fmt::format("engine{} (chosen by router '{}') is out of service", e,
                                            cluster_->router_name())));
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
  auto state = std::make_unique<InFlightRequest>(
      InFlightRequest{id, stream, core::RequestRecord{},
                      metrics_.request(e, config.pool, class_label(request_class)), 0.0, false});
  requests_.emplace(id, Placement{e, request.id});
  driver.enqueue_submit(std::move(request), std::move(state));
  return stream;
}

bool LocalGenerationService::Impl::abort(const std::string& request_id, bool stop_string,
                                         uint64_t numeric_id) {
  std::lock_guard lock(mutex_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  if (numeric_id != 0 && it->second.numeric_id != numeric_id) return false;  // id reused since
  drivers_[it->second.engine]->enqueue_abort(it->second.numeric_id, stop_string);
  return true;
}

void LocalGenerationService::Impl::forget(std::span<const std::string> ids) {
  std::lock_guard lock(mutex_);
  for (const std::string& id : ids) requests_.erase(id);
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
        config.index, config.pool, role_name(config.role), load.alive != 0, load.running,
        load.waiting, load.outstanding_tokens, load.kv_blocks_free, load.kv_blocks_total});
  }
  return summary;
}

HealthSummary LocalGenerationService::Impl::health() const {
  HealthSummary health;
  health.engines_total = static_cast<uint32_t>(drivers_.size());
  for (const auto& driver : drivers_) health.engines_alive += driver->alive() ? 1 : 0;
  health.serving = admitting_ && health.engines_alive > 0;
  return health;
}

size_t LocalGenerationService::Impl::drain(double timeout_seconds) {
  admitting_ = false;
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(std::max(0.0, timeout_seconds)));
  emptied_.wait_until(lock, deadline, [&] { return requests_.empty(); });
  const size_t left = requests_.size();
  for (const auto& [id, placement] : requests_) {
    drivers_[placement.engine]->enqueue_abort(placement.numeric_id, false);
  }
  // Aborts take effect between steps: at most one forward pass per engine away.
  emptied_.wait(lock, [&] { return requests_.empty(); });
  if (left > 0)
    spdlog::warn("drain: {} requests still running after {} s were aborted", left, timeout_seconds);
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
  return impl_->abort(request_id, false);
}
ModelSummary LocalGenerationService::model_info() const { return impl_->model_info(); }
ClusterSummary LocalGenerationService::cluster_info() const { return impl_->cluster_info(); }
HealthSummary LocalGenerationService::health() const { return impl_->health(); }
std::string LocalGenerationService::metrics_text() const { return impl_->metrics_text(); }
size_t LocalGenerationService::drain(double timeout_seconds) {
  return impl_->drain(timeout_seconds);
}
size_t LocalGenerationService::in_flight() const { return impl_->in_flight(); }

}  // namespace headway::serving
