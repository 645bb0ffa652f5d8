#include "headway/core/seed_sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "headway/core/error.h"

namespace headway::core {

namespace {

// Infinite values cannot occur (figures are finite or NaN, ratios are to a base > 0); NaN, a
// figure the seed lacks, is left out by summarize().
SeedSpread spread(std::vector<double> values) {
  const LatencySummary s = summarize(std::move(values));
  return {s.p50, s.min, s.max, s.count};
}

double value_or_nan(const std::optional<double>& v) { return v ? *v : LatencySummary::kNaN; }

// One figure of a row, as a number (NaN when the seed has none).
using Figure = std::function<double(const ComparisonRow&)>;

SeedSpread spread_of(const std::vector<Comparison>& per_seed, size_t row, const Figure& figure) {
  std::vector<double> values;
  values.reserve(per_seed.size());
  for (const Comparison& c : per_seed) values.push_back(figure(c.rows[row]));
  return spread(std::move(values));
}

// A seed counts as better only past this relative margin: two deployments that met the same
// requests differ in goodput by the last finish's few milliseconds (0.006% in a walk through a
// 500-request draw), which is a tie, not a win.
constexpr double kBetterMargin = 0.01;

SeedRatio ratio_of(const std::vector<Comparison>& per_seed, size_t row, const Figure& figure,
                   bool higher_is_better) {
  std::vector<double> ratios;
  SeedRatio out;
  for (const Comparison& c : per_seed) {
    const double mine = figure(c.rows[row]);
    const double base = figure(c.rows.front());
    if (!std::isfinite(mine) || !std::isfinite(base)) continue;
    ++out.compared;
    const double margin = kBetterMargin * std::abs(base);
    if (higher_is_better ? mine > base + margin : mine < base - margin) ++out.better;
    if (base > 0) ratios.push_back(mine / base);
  }
  out.ratio = spread(std::move(ratios));
  return out;
}

std::string seeds_text(const std::vector<uint64_t>& seeds) {
  if (seeds.empty()) return "no seeds";
  bool contiguous = true;
  for (size_t i = 1; i < seeds.size(); ++i) contiguous &= seeds[i] == seeds[i - 1] + 1;
  if (seeds.size() == 1) return fmt::format("seed {}", seeds.front());
  if (contiguous) return fmt::format("seeds {}-{}", seeds.front(), seeds.back());
  return fmt::format("seeds {}", fmt::join(seeds, ","));
}

using Text = std::function<std::string(double)>;

std::string number_text(double v, int decimals) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : std::string("-");
}

// The median, starred when some seeds lack the figure.
std::string median_cell(const SeedSpread& s, size_t seeds, const Text& text) {
  if (s.seeds == 0) return "-";
  return text(s.median) + (s.seeds < seeds ? "*" : "");
}

std::string range_cell(const SeedSpread& s, const Text& text) {
  if (s.seeds == 0) return "";
  return text(s.min) + "-" + text(s.max);
}

std::string ratio_cell(const SeedRatio& r) {
  if (r.compared == 0) return "-";
  const std::string ratio = r.ratio.seeds > 0 ? fmt::format("x{:.2f}", r.ratio.median) : "x-";
  return fmt::format("{} {}/{}", ratio, r.better, r.compared);
}

nlohmann::json spread_json(const SeedSpread& s) {
  return {{"median", number_or_null(s.median)},
          {"min", number_or_null(s.min)},
          {"max", number_or_null(s.max)},
          {"seeds", s.seeds}};
}

nlohmann::json ratio_json(const SeedRatio& r) {
  nlohmann::json j = spread_json(r.ratio);
  j["better"] = r.better;
  j["compared"] = r.compared;
  return j;
}

}  // namespace

SeedSweep summarize_seeds(const std::vector<uint64_t>& seeds,
                          const std::vector<Comparison>& per_seed) {
  if (seeds.size() != per_seed.size()) {
    throw Error(
        fmt::format("summarize_seeds: {} seeds but {} comparisons", seeds.size(), per_seed.size()),
        HW_INTERNAL);
  }
  SeedSweep out;
  out.seeds = seeds;
  if (per_seed.empty()) return out;
  const std::vector<ComparisonRow>& first = per_seed.front().rows;
  for (size_t s = 0; s < per_seed.size(); ++s) {
    const std::vector<ComparisonRow>& rows = per_seed[s].rows;
    bool same = rows.size() == first.size();
    for (size_t i = 0; same && i < rows.size(); ++i)
      same = rows[i].deployment == first[i].deployment;
    if (!same) {
      throw Error(fmt::format("summarize_seeds: seed {} compares other deployments than seed {}",
                              seeds[s], seeds.front()),
                  HW_INTERNAL);
    }
    if (out.slo.empty()) out.slo = per_seed[s].slo;
  }

  const Figure short_ttft = [](const ComparisonRow& r) { return r.short_ttft_p99; };
  const Figure long_ttft = [](const ComparisonRow& r) { return r.long_ttft_p99; };
  const Figure short_itl = [](const ComparisonRow& r) { return r.short_itl_p99; };
  const Figure goodput = [](const ComparisonRow& r) {
    return value_or_nan(r.goodput_requests_per_s);
  };
  for (size_t i = 0; i < first.size(); ++i) {
    SeedSweepRow row;
    row.deployment = first[i].deployment;
    row.short_ttft_p99 = spread_of(per_seed, i, short_ttft);
    row.long_ttft_p99 = spread_of(per_seed, i, long_ttft);
    row.short_itl_p99 = spread_of(per_seed, i, short_itl);
    row.hol_factor =
        spread_of(per_seed, i, [](const ComparisonRow& r) { return value_or_nan(r.hol_factor); });
    row.stall_factor =
        spread_of(per_seed, i, [](const ComparisonRow& r) { return value_or_nan(r.stall_factor); });
    row.output_tokens_per_s =
        spread_of(per_seed, i, [](const ComparisonRow& r) { return r.output_tokens_per_s; });
    row.goodput_requests_per_s = spread_of(per_seed, i, goodput);
    row.preemptions = spread_of(
        per_seed, i, [](const ComparisonRow& r) { return static_cast<double>(r.preemptions); });
    if (i > 0) {
      row.short_ttft_p99_vs = ratio_of(per_seed, i, short_ttft, false);
      row.long_ttft_p99_vs = ratio_of(per_seed, i, long_ttft, false);
      row.short_itl_p99_vs = ratio_of(per_seed, i, short_itl, false);
      row.goodput_vs = ratio_of(per_seed, i, goodput, true);
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

void print_seed_sweep(std::ostream& out, const SeedSweep& sweep) {
  size_t width = std::string_view("deployment").size();
  for (const SeedSweepRow& r : sweep.rows) width = std::max(width, r.deployment.size());
  width += 2;
  constexpr int kCell = 16;
  const Text seconds = [](double v) { return duration_text(v); };
  const Text hundredths = [](double v) { return number_text(v, 2); };
  const Text tenths = [](double v) { return number_text(v, 1); };
  // A median of an even number of counts may fall halfway between two.
  const Text count = [](double v) { return number_text(v, v == std::floor(v) ? 0 : 1); };
  const size_t n = sweep.seeds.size();

  std::string text;
  auto line = [&](const std::string& s) { text += s + "\n"; };
  line(fmt::format("{}{} ({} draws), {} deployment(s): median, and min-max below it",
                   sweep.workload.empty() ? "" : sweep.workload + " over ", seeds_text(sweep.seeds),
                   n, sweep.rows.size()));
  line(fmt::format("{:<{}}{:>8}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}", "", width, "",
                   "short p99", kCell, "long p99", kCell, "short p99", kCell, "HOL", kCell, "stall",
                   kCell, "output", kCell, "goodput", kCell, "preempt-", kCell));
  line(fmt::format("{:<{}}{:>8}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}", "deployment",
                   width, "", "TTFT", kCell, "TTFT", kCell, "ITL", kCell, "factor", kCell, "factor",
                   kCell, "tok/s", kCell, "req/s", kCell, "ions", kCell));
  bool starred = false;
  for (const SeedSweepRow& r : sweep.rows) {
    const std::pair<const SeedSpread*, Text> cells[] = {{&r.short_ttft_p99, seconds},
                                                        {&r.long_ttft_p99, seconds},
                                                        {&r.short_itl_p99, seconds},
                                                        {&r.hol_factor, hundredths},
                                                        {&r.stall_factor, hundredths},
                                                        {&r.output_tokens_per_s, tenths},
                                                        {&r.goodput_requests_per_s, hundredths},
                                                        {&r.preemptions, count}};
    std::string median = fmt::format("{:<{}}{:>8}", r.deployment, width, "median");
    std::string range = fmt::format("{:<{}}{:>8}", "", width, "range");
    for (const auto& [s, format] : cells) {
      starred |= s->seeds > 0 && s->seeds < n;
      median += fmt::format("{:>{}}", median_cell(*s, n, format), kCell);
      range += fmt::format("{:>{}}", range_cell(*s, format), kCell);
    }
    line(median);
    line(range);
  }
  if (sweep.rows.size() >= 2) {
    line("");
    line(fmt::format("vs {}, seed by seed: median ratio, seeds better / seeds compared",
                     sweep.rows.front().deployment));
    line(fmt::format("{:<{}}{:>8}{:>{}}{:>{}}{:>{}}{:>{}}", "deployment", width, "",
                     "short p99 TTFT", kCell, "long p99 TTFT", kCell, "short p99 ITL", kCell,
                     "goodput", kCell));
    for (size_t i = 1; i < sweep.rows.size(); ++i) {
      const SeedSweepRow& r = sweep.rows[i];
      line(fmt::format("{:<{}}{:>8}{:>{}}{:>{}}{:>{}}{:>{}}", r.deployment, width, "",
                       ratio_cell(r.short_ttft_p99_vs), kCell, ratio_cell(r.long_ttft_p99_vs),
                       kCell, ratio_cell(r.short_itl_p99_vs), kCell, ratio_cell(r.goodput_vs),
                       kCell));
    }
  }
  line("");
  line(fmt::format(
      "each seed draws the workload again (arrivals, lengths) and runs every deployment on it;"));
  line(fmt::format(
      "figures as in the single comparison{}{}{}",
      sweep.slo.empty() ? std::string() : "; goodput: " + sweep.slo + " per request",
      sweep.rows.size() >= 2 ? "; better = lower latency, higher goodput, by more than 1%" : "",
      starred ? "; * = over fewer seeds (the others had none: no long request drawn)" : ""));
  out << text;
}

nlohmann::json seed_sweep_to_json(const SeedSweep& sweep) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < sweep.rows.size(); ++i) {
    const SeedSweepRow& r = sweep.rows[i];
    nlohmann::json row = {{"deployment", r.deployment},
                          {"short_ttft_p99", spread_json(r.short_ttft_p99)},
                          {"long_ttft_p99", spread_json(r.long_ttft_p99)},
                          {"short_itl_p99", spread_json(r.short_itl_p99)},
                          {"hol_factor", spread_json(r.hol_factor)},
                          {"stall_factor", spread_json(r.stall_factor)},
                          {"output_tokens_per_s", spread_json(r.output_tokens_per_s)},
                          {"goodput_requests_per_s", spread_json(r.goodput_requests_per_s)},
                          {"preemptions", spread_json(r.preemptions)}};
    row["vs_baseline"] = i == 0
                             ? nlohmann::json(nullptr)
                             : nlohmann::json{{"short_ttft_p99", ratio_json(r.short_ttft_p99_vs)},
                                              {"long_ttft_p99", ratio_json(r.long_ttft_p99_vs)},
                                              {"short_itl_p99", ratio_json(r.short_itl_p99_vs)},
                                              {"goodput", ratio_json(r.goodput_vs)}};
    rows.push_back(std::move(row));
  }
  return {{"workload", sweep.workload},
          {"seeds", sweep.seeds},
          {"slo", sweep.slo},
          {"time_unit", "s"},
          {"baseline", sweep.rows.empty() ? nlohmann::json(nullptr)
                                          : nlohmann::json(sweep.rows.front().deployment)},
          {"rows", std::move(rows)}};
}

}  // namespace headway::core
