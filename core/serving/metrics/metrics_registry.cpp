#include <fmt/format.h>
#include <headway/serving/metrics_registry.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <stdexcept>

namespace headway::serving {
namespace {

bool valid_name(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(letter || (digit && i > 0) || (allow_colon && c == ':'))) return false;
  }
  return true;
}

// Each series of a counter or gauge family with its value (the caller holds the family's mutex).
template <typename Series>
std::vector<SeriesReading> read_series(const std::vector<std::vector<std::string>>& labels,
                                       const std::deque<Series>& series) {
  std::vector<SeriesReading> out;
  out.reserve(series.size());
  for (size_t s = 0; s < series.size(); ++s) out.push_back({labels[s], series[s].value()});
  return out;
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_help(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double value) {
  // Buckets are few (tens): a linear scan beats a binary search's branches here.
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

MetricFamily::MetricFamily(MetricType type, std::string name, std::string help,
                           std::vector<std::string> label_names)
    : type_(type),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)) {}

size_t MetricFamily::series_index(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) {
    throw std::invalid_argument(fmt::format("metric {}: {} label values given for {} labels", name_,
                                            values.size(), label_names_.size()));
  }
  for (size_t i = 0; i < label_values_.size(); ++i) {
    if (label_values_[i] == values) return i;
  }
  label_values_.push_back(values);
  create_series();
  return label_values_.size() - 1;
}

void MetricFamily::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  if (label_values_.empty()) return;
  static constexpr const char* kTypeNames[] = {"counter", "gauge", "histogram"};
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, escape_help(help_), name_,
                     kTypeNames[static_cast<int>(type_)]);
  for (size_t s = 0; s < label_values_.size(); ++s) {
    std::string labels;
    for (size_t l = 0; l < label_names_.size(); ++l) {
      if (l > 0) labels += ',';
      labels += fmt::format("{}=\"{}\"", label_names_[l], escape_label_value(label_values_[s][l]));
    }
    render_series(out, s, labels);
  }
}

CounterFamily::CounterFamily(std::string name, std::string help,
                             std::vector<std::string> label_names)
    : MetricFamily(MetricType::kCounter, std::move(name), std::move(help), std::move(label_names)) {
}

Counter& CounterFamily::with(const std::vector<std::string>& values) {
  std::lock_guard lock(mutex_);
  return series_[series_index(values)];
}

double CounterFamily::total() const {
  std::lock_guard lock(mutex_);
  double sum = 0.0;
  for (const Counter& counter : series_) sum += counter.value();
  return sum;
}

std::vector<SeriesReading> CounterFamily::readings() const {
  std::lock_guard lock(mutex_);
  return read_series(label_values(), series_);
}

void CounterFamily::render_series(std::string& out, size_t index, const std::string& labels) const {
  out += fmt::format("{}{}{}{} {}\n", name(), labels.empty() ? "" : "{", labels,
                     labels.empty() ? "" : "}", format_sample_value(series_[index].value()));
}

GaugeFamily::GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names)
    : MetricFamily(MetricType::kGauge, std::move(name), std::move(help), std::move(label_names)) {}

Gauge& GaugeFamily::with(const std::vector<std::string>& values) {
  std::lock_guard lock(mutex_);
  return series_[series_index(values)];
}

std::vector<SeriesReading> GaugeFamily::readings() const {
  std::lock_guard lock(mutex_);
  return read_series(label_values(), series_);
}

void GaugeFamily::render_series(std::string& out, size_t index, const std::string& labels) const {
  out += fmt::format("{}{}{}{} {}\n", name(), labels.empty() ? "" : "{", labels,
                     labels.empty() ? "" : "}", format_sample_value(series_[index].value()));
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names, std::vector<double> bounds)
    : MetricFamily(MetricType::kHistogram, std::move(name), std::move(help),
                   std::move(label_names)),
      bounds_(std::move(bounds)) {}

Histogram& HistogramFamily::with(const std::vector<std::string>& values) {
  std::lock_guard lock(mutex_);
  return series_[series_index(values)];
}

double HistogramFamily::total_sum() const {
  std::lock_guard lock(mutex_);
  double sum = 0.0;
  for (const Histogram& histogram : series_) sum += histogram.snapshot().sum;
  return sum;
}

void HistogramFamily::render_series(std::string& out, size_t index,
                                    const std::string& labels) const {
  const Histogram::Snapshot s = series_[index].snapshot();
  const std::string sep = labels.empty() ? "" : ",";
  for (size_t b = 0; b <= bounds_.size(); ++b) {
    const std::string le =
        b < bounds_.size() ? format_sample_value(bounds_[b]) : std::string("+Inf");
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name(), labels, sep, le, s.cumulative[b]);
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n", name(), braces, format_sample_value(s.sum));
  out += fmt::format("{}_count{} {}\n", name(), braces, s.count);
}

void MetricsRegistry::check_new(const std::string& name,
                                const std::vector<std::string>& labels) const {
  if (!valid_name(name, /*allow_colon=*/false)) {
    throw std::invalid_argument(
        fmt::format("metric name '{}' is not [a-zA-Z_][a-zA-Z0-9_]* (colons are reserved for "
                    "recording rules)",
                    name));
  }
  for (const std::string& label : labels) {
    if (!valid_name(label, false) || label.starts_with("__")) {
      throw std::invalid_argument(
          fmt::format("metric {}: label name '{}' is not [a-zA-Z_][a-zA-Z0-9_]* or starts with "
                      "__ (reserved)",
                      name, label));
    }
  }
  for (const auto& family : families_) {
    if (family->name() == name) {
      throw std::invalid_argument(fmt::format("metric {} is registered twice", name));
    }
  }
}

CounterFamily& MetricsRegistry::counter(std::string name, std::string help,
                                        std::vector<std::string> labels) {
  std::lock_guard lock(mutex_);
  check_new(name, labels);
  auto family =
      std::make_unique<CounterFamily>(std::move(name), std::move(help), std::move(labels));
  CounterFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

GaugeFamily& MetricsRegistry::gauge(std::string name, std::string help,
                                    std::vector<std::string> labels) {
  std::lock_guard lock(mutex_);
  check_new(name, labels);
  auto family = std::make_unique<GaugeFamily>(std::move(name), std::move(help), std::move(labels));
  GaugeFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

HistogramFamily& MetricsRegistry::histogram(std::string name, std::string help,
                                            std::vector<std::string> labels,
                                            std::vector<double> bounds) {
  std::lock_guard lock(mutex_);
  check_new(name, labels);
  if (std::find(labels.begin(), labels.end(), "le") != labels.end()) {
    throw std::invalid_argument(fmt::format("histogram {}: 'le' is reserved for buckets", name));
  }
  if (bounds.empty()) throw std::invalid_argument(fmt::format("histogram {}: no buckets", name));
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      throw std::invalid_argument(
          fmt::format("histogram {}: bucket bounds must be finite and strictly increasing "
                      "(bound {} is {})",
                      name, i, bounds[i]));
    }
  }
  auto family = std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                                  std::move(labels), std::move(bounds));
  HistogramFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& family : families_) family->render(out);
  return out;
}

}  // namespace headway::serving
