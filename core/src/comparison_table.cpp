#include "headway/core/comparison_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "headway/core/error.h"

namespace headway::core {

namespace {

std::optional<double> ratio(double num, double den) {
  if (!std::isfinite(num) || !std::isfinite(den) || !(den > 0)) return std::nullopt;
  return num / den;
}

std::optional<double> ratio(const std::optional<double>& num, const std::optional<double>& den) {
  if (!num || !den) return std::nullopt;
  return ratio(*num, *den);
}

std::string factor_text(const std::optional<double>& f) {
  return f ? fmt::format("{:.2f}", *f) : std::string("-");
}

std::string times_text(const std::optional<double>& f) {
  return f ? fmt::format("x{:.2f}", *f) : std::string("-");
}

}  // namespace

Comparison compare_reports(const std::vector<NamedReport>& reports) {
  Comparison out;
  for (const NamedReport& named : reports) {
    if (named.report == nullptr) {
      throw Error(fmt::format("compare_reports: no report for deployment '{}'", named.deployment),
                  HW_INTERNAL);
    }
    const Report& r = *named.report;
    ComparisonRow row;
    row.deployment = named.deployment;
    row.short_ttft_p50 = r.short_group.ttft.p50;
    row.short_ttft_p99 = r.short_group.ttft.p99;
    row.long_ttft_p50 = r.long_group.ttft.p50;
    row.long_ttft_p99 = r.long_group.ttft.p99;
    row.short_itl_p99 = r.short_group.itl.p99;
    row.hol_factor = r.hol_factor;
    row.stall_factor = r.stall_factor;
    row.output_tokens_per_s = r.overall.output_tokens_per_s;
    if (r.goodput) {
      row.goodput_requests_per_s = r.goodput->requests_per_s;
      if (out.slo.empty()) out.slo = r.goodput->slo;
    }
    row.preemptions = r.preemptions;
    row.kv_transfers = r.overall.kv_transfer.count;
    row.kv_transfer_p50 = r.overall.kv_transfer.p50;
    row.kv_transfer_p99 = r.overall.kv_transfer.p99;
    row.kv_wait_p99 = r.overall.kv_wait.p99;
    out.rows.push_back(std::move(row));
  }
  if (out.rows.empty()) return out;
  const ComparisonRow base = out.rows.front();
  for (size_t i = 1; i < out.rows.size(); ++i) {
    ComparisonRow& row = out.rows[i];
    if (auto t = ratio(row.output_tokens_per_s, base.output_tokens_per_s)) {
      row.throughput_change = *t - 1;
    }
    row.goodput_ratio = ratio(row.goodput_requests_per_s, base.goodput_requests_per_s);
    row.short_ttft_p99_ratio = ratio(row.short_ttft_p99, base.short_ttft_p99);
    row.long_ttft_p99_ratio = ratio(row.long_ttft_p99, base.long_ttft_p99);
    row.short_itl_p99_ratio = ratio(row.short_itl_p99, base.short_itl_p99);
  }
  return out;
}

void print_comparison(std::ostream& out, const Comparison& c) {
  size_t width = std::string_view("deployment").size();
  for (const ComparisonRow& r : c.rows) width = std::max(width, r.deployment.size());
  width += 2;
  const bool kv = std::any_of(c.rows.begin(), c.rows.end(),
                              [](const ComparisonRow& r) { return r.kv_transfers > 0; });
  std::string text;
  auto line = [&](const std::string& s) { text += s + "\n"; };

  // Two header lines: the metric groups, then the statistic of each column.
  std::string head1 = fmt::format("{:<{}}   {:-^15}   {:-^15}{:>10}{:>8}{:>8}{:>11}{:>10}{:>9}", "",
                                  width, " short TTFT ", " long TTFT ", "short ITL", "HOL", "stall",
                                  "output", "goodput", "preempt-");
  std::string head2 = fmt::format("{:<{}}{:>9}{:>9}{:>9}{:>9}{:>10}{:>8}{:>8}{:>11}{:>10}{:>9}",
                                  "deployment", width, "p50", "p99", "p50", "p99", "p99", "factor",
                                  "factor", "tok/s", "req/s", "ions");
  if (kv) {
    head1 += fmt::format("   {:-^15}{:>10}", " KV transfer ", "KV wait");
    head2 += fmt::format("{:>9}{:>9}{:>10}", "p50", "p99", "p99");
  }
  line(head1);
  line(head2);
  for (const ComparisonRow& r : c.rows) {
    std::string row = fmt::format(
        "{:<{}}{:>9}{:>9}{:>9}{:>9}{:>10}{:>8}{:>8}{:>11.1f}{:>10}{:>9}", r.deployment, width,
        duration_text(r.short_ttft_p50), duration_text(r.short_ttft_p99),
        duration_text(r.long_ttft_p50), duration_text(r.long_ttft_p99),
        duration_text(r.short_itl_p99), factor_text(r.hol_factor), factor_text(r.stall_factor),
        r.output_tokens_per_s,
        r.goodput_requests_per_s ? fmt::format("{:.2f}", *r.goodput_requests_per_s) : "-",
        r.preemptions);
    if (kv) {
      row += fmt::format("{:>9}{:>9}{:>10}", duration_text(r.kv_transfer_p50),
                         duration_text(r.kv_transfer_p99), duration_text(r.kv_wait_p99));
    }
    line(row);
  }
  if (c.rows.size() >= 2) {
    line("");
    line(fmt::format("{:<{}}{:>11}{:>10}{:>16}{:>15}{:>15}", "vs " + c.rows.front().deployment,
                     width, "output", "goodput", "short p99 TTFT", "long p99 TTFT",
                     "short p99 ITL"));
    for (size_t i = 1; i < c.rows.size(); ++i) {
      const ComparisonRow& r = c.rows[i];
      line(fmt::format("{:<{}}{:>11}{:>10}{:>16}{:>15}{:>15}", r.deployment, width,
                       r.throughput_change ? fmt::format("{:+.1f}%", 100 * *r.throughput_change)
                                           : std::string("-"),
                       times_text(r.goodput_ratio), times_text(r.short_ttft_p99_ratio),
                       times_text(r.long_ttft_p99_ratio), times_text(r.short_itl_p99_ratio)));
    }
  }
  line("");
  line(fmt::format(
      "short = non-long classes, long = long classes; HOL/stall factor = short p99 TTFT/ITL with "
      "vs without the long classes on the same deployment; goodput = requests/s meeting {} per "
      "request{}",
      c.slo.empty() ? std::string("an SLO (none given)") : c.slo,
      kv ? "; KV transfer, and KV wait (after the prefill, until the transfer could start: room on "
           "the decode engine, the end of its step, and the transfers before it on its links, "
           "which carry one at a time), over the requests whose KV moved"
         : ""));
  out << text;
}

nlohmann::json comparison_to_json(const Comparison& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ComparisonRow& r : c.rows) {
    rows.push_back({{"deployment", r.deployment},
                    {"short_ttft_p50", number_or_null(r.short_ttft_p50)},
                    {"short_ttft_p99", number_or_null(r.short_ttft_p99)},
                    {"long_ttft_p50", number_or_null(r.long_ttft_p50)},
                    {"long_ttft_p99", number_or_null(r.long_ttft_p99)},
                    {"short_itl_p99", number_or_null(r.short_itl_p99)},
                    {"hol_factor", number_or_null(r.hol_factor)},
                    {"stall_factor", number_or_null(r.stall_factor)},
                    {"output_tokens_per_s", r.output_tokens_per_s},
                    {"goodput_requests_per_s", number_or_null(r.goodput_requests_per_s)},
                    {"preemptions", r.preemptions},
                    {"kv_transfers", r.kv_transfers},
                    {"kv_transfer_p50", number_or_null(r.kv_transfer_p50)},
                    {"kv_transfer_p99", number_or_null(r.kv_transfer_p99)},
                    {"kv_wait_p99", number_or_null(r.kv_wait_p99)},
                    {"vs_baseline",
                     {{"throughput_change", number_or_null(r.throughput_change)},
                      {"goodput_ratio", number_or_null(r.goodput_ratio)},
                      {"short_ttft_p99_ratio", number_or_null(r.short_ttft_p99_ratio)},
                      {"long_ttft_p99_ratio", number_or_null(r.long_ttft_p99_ratio)},
                      {"short_itl_p99_ratio", number_or_null(r.short_itl_p99_ratio)}}}});
  }
  return {
      {"baseline", c.rows.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.rows[0].deployment)},
      {"slo", c.slo},
      {"time_unit", "s"},
      {"rows", std::move(rows)}};
}

}  // namespace headway::core
