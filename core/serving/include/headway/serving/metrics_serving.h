// The serving metrics of a Headway process, named after vLLM's (`vllm:time_to_first_token_seconds`
// becomes `headway_time_to_first_token_seconds`: Prometheus reserves colons for recording rules),
// so that dashboards built for vLLM need only a prefix change. docs/serving.md lists them.
//
// Series are labelled by engine (index and pool) and, for per-request metrics, by request class.
// Callers look a series set up once (per engine at start, per request at admission) and record
// into it lock-free from then on.
//
// Ownership: ServingMetrics owns its registry; the series structs hold references into it and
// must not outlive it. Threading: every method is safe to call from any thread.
#pragma once

#include <headway/core/plugin_metrics_sink.h>
#include <headway/serving/generation_service.h>
#include <headway/serving/metrics_registry.h>
#include <headway/serving/request_stream.h>

#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace headway::serving {

// One engine's step-level series.
struct EngineSeries {
  Gauge& running;
  Gauge& waiting;
  Gauge& kv_usage;  // fraction of KV blocks in use, 0..1
  Gauge& alive;     // 1 while the engine serves, 0 once it failed
  Histogram& prefill_tokens_per_step;
  Histogram& decode_tokens_per_step;
  Counter& preemptions;
  Counter& kv_transfers;  // KV moved into this engine (disaggregated serving)
  Histogram& kv_transfer_seconds;
  Histogram& kv_wait_seconds;  // of the KV moved into this engine, its wait for room here
  Counter& kv_network_bytes;   // of the KV moved into this engine, bytes fetched from another host
  Counter& kv_cached_tokens;   // of the KV moved into this engine, tokens its prefix cache held
  Counter& prefix_cache_queries;  // tokens of admitted requests looked up in the prefix cache
  Counter& prefix_cache_hits;     // of those, tokens found cached
};

// The per-request series of one (engine, request class). Pointers, not references, so that a
// request handed to another engine (disaggregated serving) can take that engine's series.
// Not owned: the series live as long as the ServingMetrics that made them.
struct RequestSeries {
  Histogram* time_to_first_token = nullptr;
  Histogram* inter_token_latency = nullptr;
  Histogram* e2e_latency = nullptr;
  Histogram* queue_time = nullptr;
  Counter* prompt_tokens = nullptr;
  Counter* generation_tokens = nullptr;
  std::array<Counter*, 4> finished{};  // by Finish: kLength, kStop, kAbort, kError

  Counter& finished_with(Finish reason) const;
};

// Why the service refused a request before it reached an engine: a bad request, a full queue, no
// engine to take it, or a part of the server failing on it (a router plugin's error).
enum class Rejection { kInvalid, kQueueFull, kUnavailable, kInternal, kUnauthorized };

class ServingMetrics {
 public:
  ServingMetrics();
  ServingMetrics(const ServingMetrics&) = delete;
  ServingMetrics& operator=(const ServingMetrics&) = delete;

  // Distinct request classes that get series of their own; later ones share the class "other",
  // so that clients cannot grow the number of series without bound.
  static constexpr size_t kMaxClassLabels = 16;

  // Series for one engine / one (engine, class); created on first use, the same on later calls.
  EngineSeries engine(uint32_t index, const std::string& pool);
  // A router process's series for one engine process: as engine(), but its per-step histograms
  // are kept out of the exposition (the process steps elsewhere, and the router cannot fill them:
  // zeros would read as data).
  EngineSeries remote_engine(uint32_t index, const std::string& pool);
  RequestSeries request(uint32_t engine, const std::string& pool, const std::string& request_class);
  void rejected(Rejection why);
  // Where one plugin instance's counters and gauges go (core::HostServices::export_metrics):
  // headway_plugin_total and headway_plugin_value, labelled by engine (empty for a
  // router or a KV transport), pool, kind ("model", "scheduler", "router", "kv_transport"),
  // plugin (its short name) and metric (the plugin's name for it). Owned here: it lives as long as
  // these metrics.
  core::PluginMetricsSink& plugin(const std::string& engine, const std::string& pool,
                                  const std::string& kind, const std::string& plugin);
  // What plugin() sinks have exported so far, one sample per series (for ClusterInfo).
  std::vector<PluginMetricSample> plugin_samples() const;
  // A router process's series for a plugin metric of one of its engine processes, labelled as
  // plugin()'s: engine (the engine process), pool, kind, plugin, metric. The caller bounds how
  // many it makes.
  Counter& forwarded_plugin_counter(const std::vector<std::string>& labels);
  Gauge& forwarded_plugin_gauge(const std::vector<std::string>& labels);

  // The exposition text of every metric.
  std::string render() const { return registry_.render(); }
  // The counters of ServiceTotals, summed over engines and request classes.
  ServiceTotals totals() const;
  MetricsRegistry& registry() { return registry_; }

 private:
  const std::string& class_label(const std::string& request_class);
  EngineSeries engine_series(uint32_t index, const std::string& pool,
                             HistogramFamily& prefill_per_step, HistogramFamily& decode_per_step);

  MetricsRegistry registry_;
  MetricsRegistry unexported_;  // never rendered: remote_engine()'s per-step histograms
  std::mutex class_labels_mutex_;
  std::set<std::string> class_labels_;  // guarded by class_labels_mutex_
  HistogramFamily& ttft_;
  HistogramFamily& itl_;
  HistogramFamily& e2e_;
  HistogramFamily& queue_;
  CounterFamily& prompt_tokens_;
  CounterFamily& generation_tokens_;
  CounterFamily& success_;
  CounterFamily& rejected_;
  GaugeFamily& running_;
  GaugeFamily& waiting_;
  GaugeFamily& kv_usage_;
  GaugeFamily& alive_;
  HistogramFamily& prefill_per_step_;
  HistogramFamily& decode_per_step_;
  HistogramFamily& remote_prefill_per_step_;  // in unexported_
  HistogramFamily& remote_decode_per_step_;   // in unexported_
  CounterFamily& preemptions_;
  CounterFamily& kv_transfers_;
  HistogramFamily& kv_transfer_seconds_;
  HistogramFamily& kv_wait_seconds_;
  CounterFamily& kv_network_bytes_;
  CounterFamily& kv_cached_tokens_;
  CounterFamily& prefix_cache_queries_;
  CounterFamily& prefix_cache_hits_;
  CounterFamily& plugin_counters_;
  GaugeFamily& plugin_gauges_;
  std::mutex plugins_mutex_;
  std::vector<std::unique_ptr<core::PluginMetricsSink>> plugins_;  // guarded by plugins_mutex_
};

}  // namespace headway::serving
