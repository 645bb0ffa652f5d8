// A small Prometheus metrics registry: counters, gauges and histograms in labelled families, and
// their text exposition (format 0.0.4: HELP and TYPE lines, `_bucket{le=...}`, `_sum`, `_count`,
// escaped label values).
//
// Recording is lock-free: a family hands out a series (one label-value combination) once, under
// the registry's mutex, and the caller keeps the returned reference; adding to a counter, setting a
// gauge or observing a histogram value is then a few relaxed atomic operations with no lock and no
// allocation. Engine threads each record into their own series (labelled by engine), so they do not
// even share cache lines on the hot path.
//
// Ownership: the registry owns every family and series; references stay valid for the registry's
// life (series are never removed). Threading: every method is safe to call from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace headway::serving {

class Counter {
 public:
  // `amount` must be >= 0 (a counter only goes up); negative amounts are ignored.
  void add(double amount = 1.0) {
    if (amount > 0.0) value_.fetch_add(amount, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, strictly increasing (+Inf is implicit).
  explicit Histogram(const std::vector<double>& bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0.0;
    uint64_t count = 0;
  };
  // Counts read one bucket at a time: a snapshot taken while others observe may be off by the
  // observations in progress, never inconsistent (count is the +Inf bucket).
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

enum class MetricType { kCounter, kGauge, kHistogram };

// One series of a counter or gauge family as read at one moment: its label values (in the
// family's label order) and its value.
struct SeriesReading {
  std::vector<std::string> labels;
  double value = 0.0;
};

// The common part of a family: name, help, label names, and the label values of each series.
class MetricFamily {
 public:
  MetricFamily(MetricType type, std::string name, std::string help,
               std::vector<std::string> label_names);
  virtual ~MetricFamily() = default;
  MetricType type() const { return type_; }
  const std::string& name() const { return name_; }
  // Appends this family in the exposition format (nothing when it has no series yet).
  void render(std::string& out) const;

 protected:
  // Index of the series with these values, creating it when new. Caller holds mutex_.
  size_t series_index(const std::vector<std::string>& values);
  virtual void create_series() = 0;
  virtual void render_series(std::string& out, size_t index, const std::string& labels) const = 0;
  // The label values of every series, in creation order. Caller holds mutex_.
  const std::vector<std::vector<std::string>>& label_values() const { return label_values_; }
  mutable std::mutex mutex_;

 private:
  MetricType type_;
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::vector<std::vector<std::string>> label_values_;
};

class CounterFamily final : public MetricFamily {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> label_names);
  // The series with these label values (as many as label names; throws std::invalid_argument
  // otherwise). The reference stays valid for the registry's life.
  Counter& with(const std::vector<std::string>& values);
  // The sum over every series (what a PromQL sum() of the family would give).
  double total() const;
  // Every series with its value now.
  std::vector<SeriesReading> readings() const;

 private:
  void create_series() override { series_.emplace_back(); }
  void render_series(std::string& out, size_t index, const std::string& labels) const override;
  std::deque<Counter> series_;  // deque: references survive growth
};

class GaugeFamily final : public MetricFamily {
 public:
  GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names);
  Gauge& with(const std::vector<std::string>& values);
  // Every series with its value now.
  std::vector<SeriesReading> readings() const;

 private:
  void create_series() override { series_.emplace_back(); }
  void render_series(std::string& out, size_t index, const std::string& labels) const override;
  std::deque<Gauge> series_;
};

class HistogramFamily final : public MetricFamily {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> bounds);
  Histogram& with(const std::vector<std::string>& values);
  // The sum of every observed value over every series (PromQL's sum(<name>_sum)).
  double total_sum() const;

 private:
  void create_series() override { series_.emplace_back(bounds_); }
  void render_series(std::string& out, size_t index, const std::string& labels) const override;
  std::vector<double> bounds_;
  std::deque<Histogram> series_;
};

class MetricsRegistry {
 public:
  // Each adds a family and returns it (owned by the registry). Throws std::invalid_argument on a
  // name or label name that Prometheus does not allow (colons are reserved for recording rules),
  // a name registered twice, a label named "le" on a histogram, or bounds not strictly increasing.
  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> labels = {});
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> labels = {});
  HistogramFamily& histogram(std::string name, std::string help, std::vector<std::string> labels,
                             std::vector<double> bounds);

  // Every family with at least one series, in registration order, in the text format 0.0.4.
  std::string render() const;

 private:
  void check_new(const std::string& name, const std::vector<std::string>& labels) const;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<MetricFamily>> families_;
};

// Text format helpers, exposed for tests: a label value with \, " and newline escaped; a HELP
// text with \ and newline escaped; a sample value ("+Inf", "-Inf", "NaN" or the shortest decimal).
std::string escape_label_value(const std::string& value);
std::string escape_help(const std::string& help);
std::string format_sample_value(double value);

}  // namespace headway::serving
