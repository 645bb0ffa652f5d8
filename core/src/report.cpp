#include "headway/core/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "headway/core/error.h"
#include "headway/core/percentiles.h"
#include "turn_report.h"

namespace headway::core {

LatencySummary summarize(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }),
               values.end());
  LatencySummary s;
  s.count = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.p50 = percentile_sorted(values, 50);
  s.p90 = percentile_sorted(values, 90);
  s.p99 = percentile_sorted(values, 99);
  s.min = values.front();
  s.max = values.back();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return s;
}

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json number_or_null(const std::optional<double>& v) {
  return v ? number_or_null(*v) : nlohmann::json(nullptr);
}

nlohmann::json summary_json(const LatencySummary& s) {
  return {{"count", s.count},
          {"p50", number_or_null(s.p50)},
          {"p90", number_or_null(s.p90)},
          {"p99", number_or_null(s.p99)},
          {"max", number_or_null(s.max)},
          {"mean", number_or_null(s.mean)}};
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  const double a = std::abs(seconds);
  if (a < 1e-3) return fmt::format("{:.0f}us", seconds * 1e6);
  if (a < 1) return fmt::format("{:.1f}ms", seconds * 1e3);
  return fmt::format("{:.2f}s", seconds);
}

namespace {

// Short requests each run needs for its p99 to lie below the slowest one or two of them.
constexpr size_t kSteadyP99Samples = 100;

// Raw samples of one group of records (a class, all classes, the non-long classes).
struct Samples {
  size_t records = 0, finished = 0;
  uint64_t output_tokens = 0;
  std::vector<double> ttft, itl, tpot, e2e, queue, kv_transfer, kv_wait;

  void add(const RequestRecord& r) {
    ++records;
    // Tokens of a request that failed are not output a client could use (vLLM's benchmark counts
    // only successful requests' tokens too): a run of broken streams must not show throughput.
    if (!r.finished) return;
    ++finished;
    output_tokens += r.output_tokens;
    ttft.push_back(r.first_token - r.arrival);
    e2e.push_back(r.finish - r.arrival);
    // A client (bench) cannot see when the server scheduled a request: no queue time then.
    if (std::isfinite(r.scheduled)) queue.push_back(r.scheduled - r.arrival);
    // (A client's record knows only the transfer's duration.)
    if (r.kv_moved || r.kv_transfer_seconds > 0) {
      kv_transfer.push_back(r.kv_transfer_seconds);
      kv_wait.push_back(r.kv_wait_seconds);
    }
    for (size_t i = 1; i < r.token_times.size(); ++i) {
      itl.push_back(r.token_times[i] - r.token_times[i - 1]);
    }
    if (r.output_tokens >= 2) {
      const double last = r.token_times.empty() ? r.finish : r.token_times.back();
      tpot.push_back((last - r.first_token) / static_cast<double>(r.output_tokens - 1));
    }
  }
};

ClassReport make_class_report(std::string name, bool is_long, size_t workload_requests, Samples s,
                              double span) {
  ClassReport c;
  c.name = std::move(name);
  c.is_long = is_long;
  c.requests = std::max(workload_requests, s.records);
  c.finished = s.finished;
  c.output_tokens = s.output_tokens;
  c.ttft = summarize(std::move(s.ttft));
  c.itl = summarize(std::move(s.itl));
  c.tpot = summarize(std::move(s.tpot));
  c.e2e = summarize(std::move(s.e2e));
  c.queue = summarize(std::move(s.queue));
  c.kv_transfer = summarize(std::move(s.kv_transfer));
  c.kv_wait = summarize(std::move(s.kv_wait));
  if (span > 0) {
    c.output_tokens_per_s = static_cast<double>(s.output_tokens) / span;
    c.requests_per_s = static_cast<double>(s.finished) / span;
  }
  return c;
}

void check_class(const Workload& workload, const RequestRecord& r, const char* which) {
  if (r.class_index >= workload.classes.size()) {
    throw Error(fmt::format("build_report: {} record of request {} has class_index {}, but the "
                            "workload {} has {} classes",
                            which, r.id, r.class_index, workload.source, workload.classes.size()),
                HW_INTERNAL);
  }
}

// p99 of TTFT and ITL of the non-long classes of `records`.
// p99 TTFT and ITL of the short requests, and how many TTFTs the first rests on.
struct ShortP99s {
  double ttft = NAN, itl = NAN;
  size_t ttft_samples = 0;
};

ShortP99s short_p99s(const Workload& workload, const std::vector<RequestRecord>& records,
                     const char* which) {
  Samples s;
  for (const RequestRecord& r : records) {
    check_class(workload, r, which);
    if (!workload.classes[r.class_index].is_long) s.add(r);
  }
  const LatencySummary ttft = summarize(std::move(s.ttft));
  return {ttft.p99, summarize(std::move(s.itl)).p99, ttft.count};
}

std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> ratio(std::optional<double> num, std::optional<double> den) {
  if (!num || !den || !(*den > 0)) return std::nullopt;
  return *num / *den;
}

nlohmann::json class_json(const ClassReport& c) {
  return {{"name", c.name},
          {"is_long", c.is_long},
          {"requests", c.requests},
          {"finished", c.finished},
          {"output_tokens", c.output_tokens},
          {"output_tokens_per_s", c.output_tokens_per_s},
          {"requests_per_s", c.requests_per_s},
          {"ttft", summary_json(c.ttft)},
          {"itl", summary_json(c.itl)},
          {"tpot", summary_json(c.tpot)},
          {"e2e", summary_json(c.e2e)},
          {"queue", summary_json(c.queue)},
          {"kv_transfer", summary_json(c.kv_transfer)},
          {"kv_wait", summary_json(c.kv_wait)}};
}

}  // namespace

Report build_report(const Workload& workload, const std::vector<RequestRecord>& records,
                    size_t steps, double simulated_seconds, double wall_seconds,
                    const std::vector<RequestRecord>* without_long) {
  Report report;
  report.steps = steps;
  report.simulated_seconds = simulated_seconds;
  report.wall_seconds = wall_seconds;

  std::vector<size_t> workload_requests(workload.classes.size(), 0);
  for (const WorkloadRequest& r : workload.requests) {
    if (r.class_index < workload_requests.size()) ++workload_requests[r.class_index];
  }

  std::vector<Samples> per_class(workload.classes.size());
  Samples all, short_samples, long_samples;
  size_t short_requests = 0, long_requests = 0;
  for (size_t i = 0; i < workload.classes.size(); ++i) {
    (workload.classes[i].is_long ? long_requests : short_requests) += workload_requests[i];
  }
  double first_arrival = std::numeric_limits<double>::infinity();
  double last_event = -std::numeric_limits<double>::infinity();
  for (const RequestRecord& r : records) {
    check_class(workload, r, "a");
    per_class[r.class_index].add(r);
    all.add(r);
    (workload.classes[r.class_index].is_long ? long_samples : short_samples).add(r);
    report.preemptions += r.preemptions;
    // Only prompts that were served: a refused one was never looked up in a cache, and its
    // tokens made the share cached look smaller (16,380 of 16,540 tokens in a walk).
    if (!std::isnan(r.first_token)) {
      report.prompt_tokens += r.prompt_tokens;
      report.cached_prompt_tokens += r.cached_tokens;
    }
    if (!std::isnan(r.arrival)) first_arrival = std::min(first_arrival, r.arrival);
    if (!std::isnan(r.finish)) last_event = std::max(last_event, r.finish);
    if (!r.token_times.empty()) last_event = std::max(last_event, r.token_times.back());
  }
  report.span_seconds =
      last_event > first_arrival ? last_event - first_arrival : std::max(simulated_seconds, 0.0);

  for (size_t i = 0; i < workload.classes.size(); ++i) {
    report.classes.push_back(make_class_report(workload.classes[i].name,
                                               workload.classes[i].is_long, workload_requests[i],
                                               std::move(per_class[i]), report.span_seconds));
  }
  report.overall = make_class_report("overall", false, workload.requests.size(), std::move(all),
                                     report.span_seconds);
  report.short_group = make_class_report("short", false, short_requests, std::move(short_samples),
                                         report.span_seconds);
  report.long_group =
      make_class_report("long", true, long_requests, std::move(long_samples), report.span_seconds);
  report.turns = summarize_turns(workload, records);

  if (without_long != nullptr && workload.has_long_requests()) {
    const ShortP99s with = short_p99s(workload, records, "a");
    const ShortP99s without = short_p99s(workload, *without_long, "a baseline");
    report.short_p99_ttft = finite(with.ttft);
    report.short_p99_itl = finite(with.itl);
    report.short_p99_ttft_without_long = finite(without.ttft);
    report.short_p99_itl_without_long = finite(without.itl);
    report.factor_samples = std::min(with.ttft_samples, without.ttft_samples);
    report.hol_factor = ratio(report.short_p99_ttft, report.short_p99_ttft_without_long);
    report.stall_factor = ratio(report.short_p99_itl, report.short_p99_itl_without_long);
  }
  return report;
}

void add_goodput(Report& report, const Slo& slo, const std::vector<RequestRecord>& records) {
  report.goodput = goodput(slo, records, report.span_seconds);
}

StepSummary summarize_steps(const std::vector<StepRecord>& steps,
                            const std::vector<uint32_t>& kv_blocks_total) {
  StepSummary out;
  out.steps = steps.size();
  if (steps.empty()) return out;
  std::vector<double> durations;
  durations.reserve(steps.size());
  double batch = 0, prefill = 0, decode = 0;
  for (const StepRecord& s : steps) {
    durations.push_back(s.duration);
    batch += s.batch_size;
    prefill += s.prefill_tokens;
    decode += s.decode_tokens;
    if (s.engine < kv_blocks_total.size() && kv_blocks_total[s.engine] > 0) {
      out.peak_kv_fraction = std::max(
          out.peak_kv_fraction, static_cast<double>(s.kv_blocks_used) / kv_blocks_total[s.engine]);
    }
  }
  const double n = static_cast<double>(steps.size());
  out.duration = summarize(std::move(durations));
  out.mean_batch_size = batch / n;
  out.mean_prefill_tokens = prefill / n;
  out.mean_decode_tokens = decode / n;
  return out;
}

void print_report(std::ostream& out, const Report& report) {
  size_t width = std::string_view("overall").size();
  for (const ClassReport& c : report.classes) width = std::max(width, c.name.size());
  width += 2;

  std::string text;
  auto line = [&](const std::string& s) { text += s + "\n"; };

  line(fmt::format("{:<{}}{:>5}{:>10}{:>10}{:>14}{:>10}", "class", width, "long", "requests",
                   "finished", "out tok/s", "req/s"));
  auto summary_row = [&](const ClassReport& c, bool overall) {
    line(fmt::format("{:<{}}{:>5}{:>10}{:>10}{:>14.1f}{:>10.2f}", c.name, width,
                     overall ? "" : (c.is_long ? "yes" : "no"), c.requests, c.finished,
                     c.output_tokens_per_s, c.requests_per_s));
  };
  for (const ClassReport& c : report.classes) summary_row(c, false);
  summary_row(report.overall, true);

  struct Metric {
    const char* title;
    LatencySummary ClassReport::*field;
  };
  const Metric metrics[] = {
      {"TTFT", &ClassReport::ttft},      {"ITL", &ClassReport::itl},
      {"TPOT", &ClassReport::tpot},      {"E2E", &ClassReport::e2e},
      {"queue", &ClassReport::queue},    {"KV transfer", &ClassReport::kv_transfer},
      {"KV wait", &ClassReport::kv_wait}};
  for (const Metric& m : metrics) {
    // Only disaggregated deployments move KV, and a client (bench) cannot see queue times: an
    // all-empty table would only be noise.
    if ((m.field == &ClassReport::kv_transfer || m.field == &ClassReport::kv_wait ||
         m.field == &ClassReport::queue) &&
        (report.overall.*(m.field)).count == 0) {
      continue;
    }
    line("");
    line(fmt::format("{:<{}}{:>9}{:>11}{:>11}{:>11}{:>11}{:>11}", m.title, width, "n", "p50", "p90",
                     "p99", "max", "mean"));
    auto row = [&](const ClassReport& c) {
      const LatencySummary& s = c.*(m.field);
      line(fmt::format("{:<{}}{:>9}{:>11}{:>11}{:>11}{:>11}{:>11}", c.name, width, s.count,
                       duration_text(s.p50), duration_text(s.p90), duration_text(s.p99),
                       duration_text(s.max), duration_text(s.mean)));
    };
    for (const ClassReport& c : report.classes) row(c);
    row(report.overall);
  }
  // How a conversation's turns fare as it grows (its requests only).
  if (!report.turns.empty()) {
    line("");
    text += turns_text(report.turns, report.cached_prompt_tokens_known);
  }

  line("");
  auto factor_line = [&](const char* name, const char* metric, const std::optional<double>& factor,
                         const std::optional<double>& with, const std::optional<double>& without) {
    if (factor) {
      line(
          fmt::format("{:<14}{:.2f}  (p99 {} of the short classes: {} with the long classes, {} "
                      "without)",
                      name, *factor, metric, duration_text(with.value_or(NAN)),
                      duration_text(without.value_or(NAN))));
    } else {
      line(fmt::format("{:<14}-  (needs requests of a long class and a baseline run without them)",
                       name));
    }
  };
  factor_line("HOL factor", "TTFT", report.hol_factor, report.short_p99_ttft,
              report.short_p99_ttft_without_long);
  factor_line("stall factor", "ITL", report.stall_factor, report.short_p99_itl,
              report.short_p99_itl_without_long);
  // Long requests that were refused put no load beside the short ones, so factors near 1 would
  // say nothing about head-of-line blocking.
  if ((report.hol_factor || report.stall_factor) && report.long_group.finished == 0) {
    line(fmt::format("{:<14}no long request finished: the factors compare two runs without them",
                     "  note"));
  }
  // A p99 of fewer than 100 samples is one of the slowest few: a single slow request moves it.
  if ((report.hol_factor || report.stall_factor) && report.factor_samples < kSteadyP99Samples) {
    line(
        fmt::format("{:<14}the p99s rest on {} short requests, so on their slowest one or two: "
                    "the factors are noisy below {}",
                    "  note", report.factor_samples, kSteadyP99Samples));
  }
  if (report.cached_prompt_tokens > 0) {
    line(fmt::format("{:<14}{:.1f}% of the prompt tokens were found cached ({} of {})",
                     "prefix cache",
                     100.0 * static_cast<double>(report.cached_prompt_tokens) /
                         static_cast<double>(report.prompt_tokens),
                     report.cached_prompt_tokens, report.prompt_tokens));
  }
  if (report.goodput) {
    const Goodput& g = *report.goodput;
    line(fmt::format("{:<14}{:.2f} req/s  ({} of {} requests meet {})", "goodput", g.requests_per_s,
                     g.met, g.requests, g.slo));
  }
  // A client sees no engine steps: a measured report says nothing of them rather than "0".
  line(report.measured
           ? fmt::format("{:<14}{}", "span", duration_text(report.span_seconds))
           : fmt::format("{:<14}{}  ({} steps, {} preemptions)", "span",
                         duration_text(report.span_seconds), report.steps, report.preemptions));
  if (report.step_summary && report.step_summary->steps > 0) {
    const StepSummary& s = *report.step_summary;
    line(
        fmt::format("{:<14}duration p50 {} p99 {} max {}; mean batch {:.1f} slices, {:.0f} "
                    "prefill + {:.1f} decode tokens; peak KV use {:.0f}%",
                    "steps", duration_text(s.duration.p50), duration_text(s.duration.p99),
                    duration_text(s.duration.max), s.mean_batch_size, s.mean_prefill_tokens,
                    s.mean_decode_tokens, 100.0 * s.peak_kv_fraction));
  }
  if (report.measured) {
    line(fmt::format("{:<14}{} wall, measured on a server", "time",
                     duration_text(report.wall_seconds)));
    out << text;
    return;
  }
  std::string speed;
  if (report.wall_seconds > 0 && report.simulated_seconds > 0) {
    speed = fmt::format("  ({:.1f}x real time)", report.simulated_seconds / report.wall_seconds);
  }
  line(fmt::format("{:<14}{} simulated in {} wall{}", "time",
                   duration_text(report.simulated_seconds), duration_text(report.wall_seconds),
                   speed));
  out << text;
}

namespace {
nlohmann::json step_json(const StepSummary& s) {
  return {{"steps", s.steps},
          {"duration", summary_json(s.duration)},
          {"mean_batch_size", s.mean_batch_size},
          {"mean_prefill_tokens", s.mean_prefill_tokens},
          {"mean_decode_tokens", s.mean_decode_tokens},
          {"peak_kv_fraction", s.peak_kv_fraction}};
}
}  // namespace

nlohmann::json report_to_json(const Report& report) {
  nlohmann::json classes = nlohmann::json::array();
  for (const ClassReport& c : report.classes) classes.push_back(class_json(c));
  nlohmann::json goodput_json = nullptr;
  if (report.goodput) {
    goodput_json = {{"slo", report.goodput->slo},
                    {"met", report.goodput->met},
                    {"requests", report.goodput->requests},
                    {"requests_per_s", report.goodput->requests_per_s}};
  }
  return {{"time_unit", "s"},
          {"classes", std::move(classes)},
          {"overall", class_json(report.overall)},
          {"short", class_json(report.short_group)},
          {"long", class_json(report.long_group)},
          {"goodput", std::move(goodput_json)},
          {"simulated_seconds", report.simulated_seconds},
          {"wall_seconds", report.wall_seconds},
          {"span_seconds", report.span_seconds},
          {"hol_factor", number_or_null(report.hol_factor)},
          {"stall_factor", number_or_null(report.stall_factor)},
          {"short_p99_ttft", number_or_null(report.short_p99_ttft)},
          {"short_p99_ttft_without_long", number_or_null(report.short_p99_ttft_without_long)},
          {"short_p99_itl", number_or_null(report.short_p99_itl)},
          {"short_p99_itl_without_long", number_or_null(report.short_p99_itl_without_long)},
          {"preemptions",
           report.measured ? nlohmann::json(nullptr) : nlohmann::json(report.preemptions)},
          {"steps", report.measured ? nlohmann::json(nullptr) : nlohmann::json(report.steps)},
          {"prompt_tokens", report.prompt_tokens},
          {"cached_prompt_tokens", report.cached_prompt_tokens_known
                                       ? nlohmann::json(report.cached_prompt_tokens)
                                       : nlohmann::json(nullptr)},
          {"turns", turns_to_json(report.turns, report.cached_prompt_tokens_known)},
          {"step_summary",
           report.step_summary ? step_json(*report.step_summary) : nlohmann::json(nullptr)}};
}

}  // namespace headway::core
