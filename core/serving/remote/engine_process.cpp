#include "engine_process.h"

#include <fmt/format.h>

#include <algorithm>

namespace headway::serving {
namespace {

void set_deadline(grpc::ClientContext& context, std::chrono::milliseconds deadline) {
  context.set_deadline(std::chrono::system_clock::now() + deadline);
}

std::string failure(const char* call, const grpc::Status& status) {
  return fmt::format("{} failed: {} ({})", call, status.error_message(),
                     static_cast<int>(status.error_code()));
}

}  // namespace

EngineProcess::EngineProcess(uint32_t index, std::string pool, int32_t role, std::string address,
                             std::string api_key)
    : index_(index),
      pool_(std::move(pool)),
      role_(role),
      address_(std::move(address)),
      api_key_(std::move(api_key)) {
  grpc::ChannelArguments arguments;
  // A process that went away should be retried soon after it comes back, not after gRPC's
  // default back-off of up to two minutes. The minimum is gRPC's connect timeout, which also
  // spaces attempts (connection-backoff.md), 20 s by default; and a channel whose connections
  // failed asks its resolver again, at most every 30 s by default, even for an IP address. With
  // both defaults a router started beside its engine processes served about 5-15 s after they
  // listened; with these, within a second (docs/serving.md, "Several processes").
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  arguments.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 200);
  channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), arguments);
  stub_ = v1::Headway::NewStub(channel_);
  report_.index = index_;
  report_.pool = pool_;
  report_.role = engine_role_label(role_);
  report_.address = address_;
  report_.alive = false;
}

void EngineProcess::prepare(grpc::ClientContext& context) const {
  if (!api_key_.empty()) context.AddMetadata("authorization", "Bearer " + api_key_);
}

bool EngineProcess::fetch_model(std::chrono::milliseconds deadline) {
  grpc::ClientContext context;
  prepare(context);
  set_deadline(context, deadline);
  v1::ModelInfoResponse response;
  const grpc::Status status = stub_->ModelInfo(&context, v1::ModelInfoRequest(), &response);
  if (!status.ok()) {
    mark_down(failure("ModelInfo", status));
    return false;
  }
  std::lock_guard lock(mutex_);
  model_ = ModelSummary{response.name(),
                        response.max_model_len(),
                        response.vocab(),
                        response.tokenizer(),
                        !response.samples_on_device(),
                        !response.ignores_token_ids(),
                        response.reports_prompt_logprobs(),
                        response.layers(),
                        response.kv_heads(),
                        response.head_dim()};
  return true;
}

namespace {

// The process's counts since it started, its engines together (failed ones too, counted before
// they failed: leaving them out would look like a fall, a restart).
void take_counts(const v1::ClusterInfoResponse& cluster, EngineSummary& report) {
  report.preemptions = report.prefix_cache_queries = report.prefix_cache_hits = 0;
  report.incarnation = cluster.incarnation();
  for (const v1::EngineInfo& engine : cluster.engines()) {
    report.preemptions += engine.preemptions();
    report.prefix_cache_queries += engine.prefix_cache_queries();
    report.prefix_cache_hits += engine.prefix_cache_hits();
  }
}

std::vector<PluginMetricSample> take_plugin_metrics(const v1::ClusterInfoResponse& cluster) {
  std::vector<PluginMetricSample> samples;
  samples.reserve(static_cast<size_t>(cluster.plugin_metrics_size()));
  for (const v1::PluginMetric& metric : cluster.plugin_metrics()) {
    if (metric.type() != v1::PluginMetric::COUNTER && metric.type() != v1::PluginMetric::GAUGE) {
      continue;  // a kind of metric a newer build exports: not this router's to read
    }
    samples.push_back(PluginMetricSample{
        metric.engine(), metric.pool(), metric.kind(), metric.plugin(), metric.metric(),
        metric.type() == v1::PluginMetric::COUNTER, metric.value()});
  }
  return samples;
}

}  // namespace

bool EngineProcess::poll(std::chrono::milliseconds deadline, const ModelCheck& check) {
  // Read again whenever the process was down: what answers at the address now may be a restarted
  // process with another checkpoint or another max_model_len.
  const bool fetched = !model() || !up();
  if (fetched && !fetch_model(deadline)) return false;
  uint32_t counted_requests = 0;
  uint64_t counted_prompt = 0;
  uint64_t counted_output = 0;
  {
    std::lock_guard lock(mutex_);
    counted_requests = sent_requests_;
    counted_prompt = sent_prompt_tokens_;
    counted_output = sent_output_tokens_;
  }
  v1::HealthResponse health;
  {
    grpc::ClientContext context;
    prepare(context);
    set_deadline(context, deadline);
    const grpc::Status status = stub_->Health(&context, v1::HealthRequest(), &health);
    if (!status.ok()) {
      return poll_failed(failure("Health", status), status);
    }
  }
  if (!health.serving()) {
    // A process of an older build gives no reason. Builds before the draining field said so in
    // the reason alone (health.cpp): a rolling upgrade drains exactly those.
    const bool draining = health.draining() || health.reason().starts_with("draining");
    // A draining process goes on counting until its streams end: its counts still come, for the
    // router's metrics (best effort: a failed call leaves the last ones).
    std::optional<v1::ClusterInfoResponse> counts;
    std::vector<PluginMetricSample> plugin_metrics;
    if (draining) {
      grpc::ClientContext context;
      prepare(context);
      set_deadline(context, deadline);
      v1::ClusterInfoResponse cluster;
      if (stub_->ClusterInfo(&context, v1::ClusterInfoRequest(), &cluster).ok()) {
        plugin_metrics = take_plugin_metrics(cluster);
        counts = std::move(cluster);
      }
    }
    std::lock_guard lock(mutex_);
    if (counts) {
      take_counts(*counts, report_);
      plugin_metrics_ = std::move(plugin_metrics);
    }
    up_ = false;
    draining_ = draining;
    down_reason_ = health.reason().empty()
                       ? fmt::format("not serving ({} of {} engines alive, or draining)",
                                     health.engines_alive(), health.engines_total())
                       : "not serving: " + health.reason();
    return false;
  }
  v1::ClusterInfoResponse cluster;
  {
    grpc::ClientContext context;
    prepare(context);
    set_deadline(context, deadline);
    v1::ClusterInfoRequest request;
    if (reads_kv_events_) {
      std::lock_guard lock(mutex_);
      request.set_kv_events_from(kv_events_next_);
    }
    const grpc::Status status = stub_->ClusterInfo(&context, request, &cluster);
    if (!status.ok()) {
      return poll_failed(failure("ClusterInfo", status), status);
    }
  }
  // A process restarted at the address between two polls that both answered (a quick restart, a
  // long load_report_interval_s) may serve another checkpoint or max_model_len: its model is read
  // again, as after a poll that found the process down (helper-203's review).
  // (Read once per incarnation: model_incarnation_ is the process's whose model this poll read,
  // or the last poll's, even when the check below refuses it.)
  bool restarted = false;
  {
    std::lock_guard lock(mutex_);
    restarted = !fetched && cluster.incarnation() != 0 && model_incarnation_ != 0 &&
                cluster.incarnation() != model_incarnation_;
    if (fetched) model_incarnation_ = cluster.incarnation();
  }
  if (restarted) {
    if (!fetch_model(deadline)) return false;
    std::lock_guard lock(mutex_);
    model_incarnation_ = cluster.incarnation();
  }
  EngineSummary report;
  report.index = index_;
  report.pool = pool_;
  report.role = engine_role_label(role_);
  report.address = address_;
  take_counts(cluster, report);
  std::vector<PluginMetricSample> plugin_metrics = take_plugin_metrics(cluster);
  // The process's queues together: bounded only when each of its live engines' is, and all have
  // one role. (A process that disaggregates inside admits on its prefill engines only, while its
  // waiting counts every engine's: comparing the two would be wrong either way, so it is taken as
  // unbounded, as before the field.)
  bool bounded = true;
  bool caches_prefixes = false;
  const std::string* first_role = nullptr;
  for (const v1::EngineInfo& engine : cluster.engines()) {
    if (!engine.alive()) continue;
    bounded = bounded && engine.max_waiting() != 0 &&
              (first_role == nullptr || engine.role() == *first_role);
    if (first_role == nullptr) first_role = &engine.role();
    report.max_waiting += engine.max_waiting();
    report.alive = true;
    report.running += engine.running();
    report.waiting += engine.waiting();
    report.outstanding_tokens += engine.outstanding_tokens();
    report.queued_prefill_tokens += engine.queued_prefill_tokens();
    report.kv_blocks_free += engine.kv_blocks_free();
    report.kv_blocks_total += engine.kv_blocks_total();
    report.block_size = std::max(report.block_size, engine.block_size());
    caches_prefixes = caches_prefixes || !engine.has_prefix_caching() || engine.prefix_caching();
  }
  if (!bounded) report.max_waiting = 0;
  report.prefix_caching = caches_prefixes;
  if (!report.alive) {
    mark_down("no engine of the process is alive");
    return false;
  }
  if (check) {
    if (const std::optional<ModelSummary> served = model()) {
      if (std::string refused = check(*served); !refused.empty()) {
        mark_down(std::move(refused));
        return false;
      }
    }
  }
  std::lock_guard lock(mutex_);
  if (reads_kv_events_) keep_kv_events(cluster);
  report_ = std::move(report);
  plugin_metrics_ = std::move(plugin_metrics);
  up_ = true;
  draining_ = false;
  late_polls_ = 0;
  down_reason_.clear();
  sent_requests_ -= std::min(sent_requests_, counted_requests);
  sent_prompt_tokens_ -= std::min(sent_prompt_tokens_, counted_prompt);
  sent_output_tokens_ -= std::min(sent_output_tokens_, counted_output);
  return true;
}

void EngineProcess::keep_kv_events(const v1::ClusterInfoResponse& cluster) {
  // Another process at the address (a restart): its numbers are not the last one's, and its cache
  // holds nothing the router believed, whether it reports events or not (it may have restarted
  // with prefix caching off). Its events, if any, are read from its first on the next poll.
  // (kv_incarnation_ is set only once a process reported, so the log exists.)
  if (kv_incarnation_ != 0 && cluster.incarnation() != kv_incarnation_) {
    kv_incarnation_ = cluster.incarnation();
    kv_events_->push(0, HW_KV_EVENT_ALL_REMOVED);
    kv_events_next_ = 0;
    return;
  }
  if (!cluster.reports_kv_events()) return;  // keeps none (prefix caching off, an older build)
  if (kv_events_ == nullptr) kv_events_ = std::make_unique<core::KvEventLog>(kKeptKvEvents);
  reports_kv_events_ = true;
  kv_incarnation_ = cluster.incarnation();
  if (cluster.kv_events_lost()) kv_events_->push(0, HW_KV_EVENT_ALL_REMOVED);
  for (const v1::KvEvent& event : cluster.kv_events()) {
    kv_events_->push(event.piece_hash(), event.kind());
  }
  kv_events_next_ = cluster.kv_events_next();
}

bool EngineProcess::take_kv_events(std::vector<hw_kv_event>& out) {
  std::lock_guard lock(mutex_);
  if (kv_events_ != nullptr) kv_events_->move_into(out);
  const bool announce = reports_kv_events_ && !announced_kv_events_;
  announced_kv_events_ = announced_kv_events_ || reports_kv_events_;
  return announce;
}

bool EngineProcess::poll_failed(std::string why, const grpc::Status& status) {
  std::lock_guard lock(mutex_);
  // One late answer from a busy process is not a failure yet; two in a row, or a refused or
  // broken connection, are.
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && up_ && ++late_polls_ < 2) {
    return true;
  }
  up_ = false;
  draining_ = false;
  down_reason_ = std::move(why);
  return false;
}

hw_engine_load EngineProcess::load() const {
  std::lock_guard lock(mutex_);
  hw_engine_load load{};
  load.engine_index = index_;
  load.role = role_;
  load.pool = hw_str{pool_.data(), pool_.size()};
  load.alive = up_ ? 1 : 0;
  load.running = report_.running;
  load.waiting = report_.waiting + sent_requests_;
  load.queued_prefill_tokens = report_.queued_prefill_tokens + sent_prompt_tokens_;
  load.outstanding_tokens = report_.outstanding_tokens + sent_prompt_tokens_ + sent_output_tokens_;
  load.waiting += expected_->requests.load();
  load.outstanding_tokens += expected_->tokens.load();
  load.kv_blocks_free = report_.kv_blocks_free;
  load.kv_blocks_total = report_.kv_blocks_total;
  load.block_size = report_.block_size;
  return load;
}

hw_engine_limits EngineProcess::limits() const {
  std::lock_guard lock(mutex_);
  // max_model_len: what the process admits, 0 until it has answered (holds any, to the router).
  return hw_engine_limits{sizeof(hw_engine_limits), index_, report_.max_waiting,
                          model_ ? model_->max_model_len : 0};
}

bool EngineProcess::up() const {
  std::lock_guard lock(mutex_);
  return up_;
}

bool EngineProcess::draining() const {
  std::lock_guard lock(mutex_);
  return draining_;
}

bool EngineProcess::caches_prefixes() const {
  std::lock_guard lock(mutex_);
  return report_.prefix_caching;
}

std::string EngineProcess::down_reason() const {
  std::lock_guard lock(mutex_);
  return down_reason_;
}

std::optional<ModelSummary> EngineProcess::model() const {
  std::lock_guard lock(mutex_);
  return model_;
}

EngineSummary EngineProcess::summary() const {
  std::lock_guard lock(mutex_);
  EngineSummary summary = report_;
  summary.alive = up_;
  return summary;
}

std::vector<PluginMetricSample> EngineProcess::plugin_metrics() const {
  std::lock_guard lock(mutex_);
  return plugin_metrics_;
}

void EngineProcess::sent(uint32_t prompt_tokens, uint32_t max_tokens) {
  std::lock_guard lock(mutex_);
  ++sent_requests_;
  sent_prompt_tokens_ += prompt_tokens;
  sent_output_tokens_ += max_tokens;
}

bool EngineProcess::mark_down(std::string why) {
  std::lock_guard lock(mutex_);
  const bool was_up = up_;
  up_ = false;
  draining_ = false;
  down_reason_ = std::move(why);
  return was_up;
}

}  // namespace headway::serving
