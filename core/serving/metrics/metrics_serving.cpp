#include <headway/serving/metrics_serving.h>

#include <mutex>
#include <string>
#include <vector>

#include "plugin_metrics_export.h"

namespace headway::serving {
namespace {

// vLLM's buckets, with finer low ends: the CPU reference model streams a token in milliseconds.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                         0.15,  0.2,    0.3,   0.4,  0.5,   0.75, 1.0,   2.5,
                                         5.0,   7.5,    10.0,  20.0, 40.0,  80.0};
const std::vector<double> kRequestBuckets = {
    0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,    10.0,
    15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kTokensPerStepBuckets = {1,   2,   4,    8,    16,   32,   64,   128,
                                                   256, 512, 1024, 2048, 4096, 8192, 16384};
const std::vector<double> kTransferBuckets = {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,   0.5,   1.0,   2.5,  5.0};

const std::vector<std::string> kEngineLabels = {"engine", "pool"};
const std::vector<std::string> kRequestLabels = {"engine", "pool", "request_class"};
const std::vector<std::string> kPluginLabels = {"engine", "pool", "kind", "plugin", "metric"};
// The reason label of headway_request_rejected_total, by Rejection.
constexpr const char* kRejectionNames[] = {"invalid", "queue_full", "unavailable", "internal",
                                           "unauthorized"};

}  // namespace

Counter& RequestSeries::finished_with(Finish reason) const {
  switch (reason) {
    case Finish::kLength:
      return *finished[0];
    case Finish::kStop:
      return *finished[1];
    case Finish::kAbort:
      return *finished[2];
    case Finish::kNone:
    case Finish::kError:
    case Finish::kHandoff:  // not an end: the request goes on elsewhere (not counted)
      break;
  }
  return *finished[3];
}

ServingMetrics::ServingMetrics()
    : ttft_(registry_.histogram("headway_time_to_first_token_seconds",
                                "Time from arrival to the first generated token.", kRequestLabels,
                                kTtftBuckets)),
      itl_(registry_.histogram("headway_inter_token_latency_seconds",
                               "Time between two consecutive tokens of a request.", kRequestLabels,
                               kItlBuckets)),
      e2e_(registry_.histogram("headway_e2e_request_latency_seconds",
                               "Time from arrival to the end of a request (any finish reason).",
                               kRequestLabels, kRequestBuckets)),
      queue_(registry_.histogram("headway_request_queue_time_seconds",
                                 "Time from arrival until first scheduled into a step.",
                                 kRequestLabels, kRequestBuckets)),
      prompt_tokens_(registry_.counter("headway_prompt_tokens_total",
                                       "Prompt tokens of admitted requests.", kRequestLabels)),
      generation_tokens_(registry_.counter("headway_generation_tokens_total", "Tokens generated.",
                                           kRequestLabels)),
      success_(
          registry_.counter("headway_request_success_total",
                            "Requests that ended, by finish reason (stop, length, abort, error).",
                            {"engine", "pool", "request_class", "finished_reason"})),
      rejected_(registry_.counter("headway_request_rejected_total",
                                  "Requests refused before reaching an engine, by reason "
                                  "(invalid, queue_full, unavailable, internal, unauthorized).",
                                  {"reason"})),
      running_(registry_.gauge("headway_num_requests_running",
                               "Requests in the engine's running batch.", kEngineLabels)),
      waiting_(registry_.gauge("headway_num_requests_waiting",
                               "Requests waiting to be scheduled on the engine.", kEngineLabels)),
      kv_usage_(registry_.gauge("headway_kv_cache_usage_perc",
                                "Fraction of the engine's KV-cache blocks in use (0 to 1).",
                                kEngineLabels)),
      alive_(registry_.gauge("headway_engine_alive", "1 while the engine serves, 0 once it failed.",
                             kEngineLabels)),
      prefill_per_step_(registry_.histogram("headway_iteration_prefill_tokens",
                                            "Prompt tokens computed per engine step.",
                                            kEngineLabels, kTokensPerStepBuckets)),
      decode_per_step_(registry_.histogram("headway_iteration_decode_tokens",
                                           "Tokens decoded per engine step.", kEngineLabels,
                                           kTokensPerStepBuckets)),
      remote_prefill_per_step_(unexported_.histogram("remote_prefill_tokens", "not exported",
                                                     kEngineLabels, kTokensPerStepBuckets)),
      remote_decode_per_step_(unexported_.histogram("remote_decode_tokens", "not exported",
                                                    kEngineLabels, kTokensPerStepBuckets)),
      preemptions_(registry_.counter("headway_num_preemptions_total",
                                     "Requests preempted (KV freed, to be recomputed).",
                                     kEngineLabels)),
      kv_transfers_(registry_.counter("headway_kv_transfers_total",
                                      "KV-cache transfers completed into the engine.",
                                      kEngineLabels)),
      kv_transfer_seconds_(registry_.histogram("headway_kv_transfer_duration_seconds",
                                               "Duration of a KV-cache transfer into the engine.",
                                               kEngineLabels, kTransferBuckets)),
      // On TTFT's scale: a wait for room on the decode engine runs to seconds when it is full.
      kv_wait_seconds_(registry_.histogram(
          "headway_kv_transfer_wait_seconds",
          "Time a request's KV, prefilled elsewhere, waited for room in the engine (until its "
          "blocks here were reserved and its transfer could begin).",
          kEngineLabels, kTtftBuckets)),
      kv_network_bytes_(registry_.counter(
          "headway_kv_transfer_network_bytes_total",
          "Bytes of the KV-cache transfers into the engine that came over the network from "
          "another host (FetchKvStage); shared-memory and in-process transfers add nothing.",
          kEngineLabels)),
      kv_cached_tokens_(registry_.counter(
          "headway_kv_transfer_cached_tokens_total",
          "Tokens of the KV moved into the engine that its prefix cache held already: taken from "
          "the cache, not copied.",
          kEngineLabels)),
      prefix_cache_queries_(registry_.counter(
          "headway_prefix_cache_queries_total",
          "Tokens of the requests admitted with a prefix-cache lookup (prompt, and outputs so far "
          "for a preempted request).",
          kEngineLabels)),
      prefix_cache_hits_(registry_.counter(
          "headway_prefix_cache_hits_total",
          "Of headway_prefix_cache_queries_total, tokens whose KV was found in the prefix cache "
          "and not computed.",
          kEngineLabels)),
      plugin_counters_(registry_.counter(
          "headway_plugin_total",
          "Counters a plugin keeps through the host services (counter_add), by plugin instance "
          "and the plugin's name for the counter.",
          kPluginLabels)),
      plugin_gauges_(registry_.gauge("headway_plugin_value",
                                     "Gauges a plugin sets through the host services (gauge_set), "
                                     "by plugin instance and the plugin's name for the gauge.",
                                     kPluginLabels)) {
  // Every reason at 0 from the start, so that a rate() over the series has a point before the
  // first refusal (Prometheus's advice for labelled counters whose label values are known).
  for (const char* reason : kRejectionNames) rejected_.with({reason});
}

EngineSeries ServingMetrics::engine(uint32_t index, const std::string& pool) {
  return engine_series(index, pool, prefill_per_step_, decode_per_step_);
}

EngineSeries ServingMetrics::remote_engine(uint32_t index, const std::string& pool) {
  return engine_series(index, pool, remote_prefill_per_step_, remote_decode_per_step_);
}

EngineSeries ServingMetrics::engine_series(uint32_t index, const std::string& pool,
                                           HistogramFamily& prefill_per_step,
                                           HistogramFamily& decode_per_step) {
  const std::vector<std::string> labels = {std::to_string(index), pool};
  return EngineSeries{running_.with(labels),
                      waiting_.with(labels),
                      kv_usage_.with(labels),
                      alive_.with(labels),
                      prefill_per_step.with(labels),
                      decode_per_step.with(labels),
                      preemptions_.with(labels),
                      kv_transfers_.with(labels),
                      kv_transfer_seconds_.with(labels),
                      kv_wait_seconds_.with(labels),
                      kv_network_bytes_.with(labels),
                      kv_cached_tokens_.with(labels),
                      prefix_cache_queries_.with(labels),
                      prefix_cache_hits_.with(labels)};
}

core::PluginMetricsSink& ServingMetrics::plugin(const std::string& engine, const std::string& pool,
                                                const std::string& kind,
                                                const std::string& plugin) {
  std::lock_guard lock(plugins_mutex_);
  return *plugins_.emplace_back(std::make_unique<PluginMetricsExport>(
      plugin_counters_, plugin_gauges_, std::vector<std::string>{engine, pool, kind, plugin}));
}

std::vector<PluginMetricSample> ServingMetrics::plugin_samples() const {
  std::vector<PluginMetricSample> out;
  const auto add = [&out](const std::vector<SeriesReading>& readings, bool counter) {
    for (const SeriesReading& series : readings) {
      const std::vector<std::string>& l = series.labels;  // kPluginLabels' order
      out.push_back(PluginMetricSample{l[0], l[1], l[2], l[3], l[4], counter, series.value});
    }
  };
  add(plugin_counters_.readings(), true);
  add(plugin_gauges_.readings(), false);
  return out;
}

Counter& ServingMetrics::forwarded_plugin_counter(const std::vector<std::string>& labels) {
  return plugin_counters_.with(labels);
}

Gauge& ServingMetrics::forwarded_plugin_gauge(const std::vector<std::string>& labels) {
  return plugin_gauges_.with(labels);
}

const std::string& ServingMetrics::class_label(const std::string& request_class) {
  static const std::string kOther = "other";
  std::lock_guard lock(class_labels_mutex_);
  auto it = class_labels_.find(request_class);
  if (it != class_labels_.end()) return *it;
  if (class_labels_.size() >= kMaxClassLabels) return kOther;
  return *class_labels_.insert(request_class).first;
}

RequestSeries ServingMetrics::request(uint32_t engine, const std::string& pool,
                                      const std::string& request_class) {
  const std::vector<std::string> labels = {std::to_string(engine), pool,
                                           class_label(request_class)};
  auto reason = [&](const char* name) {
    return &success_.with({labels[0], labels[1], labels[2], name});
  };
  return RequestSeries{&ttft_.with(labels),
                       &itl_.with(labels),
                       &e2e_.with(labels),
                       &queue_.with(labels),
                       &prompt_tokens_.with(labels),
                       &generation_tokens_.with(labels),
                       {reason("length"), reason("stop"), reason("abort"), reason("error")}};
}

ServiceTotals ServingMetrics::totals() const {
  ServiceTotals totals;
  totals.prompt_tokens = prompt_tokens_.total();
  totals.prefill_tokens = prefill_per_step_.total_sum();
  totals.generation_tokens = generation_tokens_.total();
  // Hits before queries: an engine adds queries first, so the hit rate never passes 1.
  totals.prefix_cache_hits = prefix_cache_hits_.total();
  totals.prefix_cache_queries = prefix_cache_queries_.total();
  totals.preemptions = preemptions_.total();
  return totals;
}

void ServingMetrics::rejected(Rejection why) {
  rejected_.with({kRejectionNames[static_cast<int>(why)]}).add();
}

}  // namespace headway::serving
