#include "headway/core/slo.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "headway/core/error.h"
#include "headway/core/percentiles.h"

namespace headway::core {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kAllowed =
    "allowed: ttft, tpot, e2e, each =<number><s|ms|us>, e.g. "
    "ttft=2s,tpot=100ms";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_term(std::string_view term, const std::string& why) {
  throw Error(fmt::format("--slo: bad term '{}': {} ({})", term, why, kAllowed));
}

double parse_duration(std::string_view term, std::string_view value) {
  double number = 0;
  const char* begin = value.data();
  const char* end = value.data() + value.size();
  auto [rest, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc() || rest == begin) bad_term(term, "the value does not start with a number");
  const std::string_view unit(rest, static_cast<size_t>(end - rest));
  double scale = 0;
  if (unit == "s") {
    scale = 1;
  } else if (unit == "ms") {
    scale = 1e-3;
  } else if (unit == "us") {
    scale = 1e-6;
  } else if (unit.empty()) {
    bad_term(term, "the value has no unit");
  } else {
    bad_term(term, fmt::format("unknown unit '{}'", unit));
  }
  if (!(number > 0) || !std::isfinite(number)) bad_term(term, "the value must be > 0");
  return number * scale;
}

// TPOT as report.h defines it; NaN for a request with fewer than 2 output tokens.
double tpot_of(const RequestRecord& r) {
  if (r.output_tokens < 2) return std::nan("");
  const double last = r.token_times.empty() ? r.finish : r.token_times.back();
  return (last - r.first_token) / static_cast<double>(r.output_tokens - 1);
}

bool within(std::optional<double> bound, double value) { return !bound || value <= *bound; }

}  // namespace

std::string slo_duration_text(double seconds) {
  if (seconds >= 1) return fmt::format("{:g}s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:g}ms", seconds * 1e3);
  return fmt::format("{:g}us", seconds * 1e6);
}

std::string Slo::text() const {
  std::string out;
  auto add = [&](const char* name, const std::optional<double>& v) {
    if (!v) return;
    if (!out.empty()) out += ",";
    out += fmt::format("{}={}", name, slo_duration_text(*v));
  };
  add("ttft", ttft);
  add("tpot", tpot);
  add("e2e", e2e);
  return out;
}

Slo default_slo() {
  Slo slo;
  slo.ttft = 2.0;
  slo.tpot = 0.1;
  return slo;
}

Slo parse_slo(std::string_view text) {
  Slo slo;
  if (trim(text).empty()) throw Error(fmt::format("--slo: empty ({})", kAllowed));
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view term = trim(text.substr(0, comma));
    if (term.empty()) bad_term(term, "empty term (a stray comma?)");
    const size_t eq = term.find('=');
    if (eq == std::string_view::npos) bad_term(term, "expected name=value");
    const std::string_view name = trim(term.substr(0, eq));
    const std::string_view value = trim(term.substr(eq + 1));
    std::optional<double>* slot = nullptr;
    if (name == "ttft") {
      slot = &slo.ttft;
    } else if (name == "tpot") {
      slot = &slo.tpot;
    } else if (name == "e2e") {
      slot = &slo.e2e;
    } else if (name == "itl") {
      bad_term(term, "itl is not a per-request term; bound the stream with tpot");
    } else {
      bad_term(term, fmt::format("unknown name '{}'", name));
    }
    if (slot->has_value()) bad_term(term, fmt::format("'{}' is given twice", name));
    *slot = parse_duration(term, value);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return slo;
}

bool meets_slo(const Slo& slo, const RequestRecord& r) {
  if (!r.finished) return false;
  const double tpot = tpot_of(r);
  return within(slo.ttft, r.first_token - r.arrival) &&
         (std::isnan(tpot) || within(slo.tpot, tpot)) && within(slo.e2e, r.finish - r.arrival);
}

Goodput goodput(const Slo& slo, const std::vector<RequestRecord>& records, double span_seconds) {
  Goodput g;
  g.slo = slo.text();
  g.requests = records.size();
  g.met = static_cast<size_t>(std::count_if(
      records.begin(), records.end(), [&](const RequestRecord& r) { return meets_slo(slo, r); }));
  if (span_seconds > 0) g.requests_per_s = static_cast<double>(g.met) / span_seconds;
  return g;
}

SloP99 p99_against_slo(const Slo& slo, const std::vector<RequestRecord>& records) {
  std::vector<double> ttft, tpot, e2e;
  for (const RequestRecord& r : records) {
    if (!r.finished) {
      ttft.push_back(kInf);
      tpot.push_back(kInf);
      e2e.push_back(kInf);
      continue;
    }
    ttft.push_back(r.first_token - r.arrival);
    e2e.push_back(r.finish - r.arrival);
    if (const double t = tpot_of(r); !std::isnan(t)) tpot.push_back(t);
  }
  SloP99 out;
  out.ttft = slo.ttft ? percentile(std::move(ttft), 99) : std::nan("");
  out.tpot = slo.tpot ? percentile(std::move(tpot), 99) : std::nan("");
  out.e2e = slo.e2e ? percentile(std::move(e2e), 99) : std::nan("");
  // An empty run holds nothing: there is no evidence the deployment serves anything.
  out.holds = !records.empty() && (!slo.ttft || out.ttft <= *slo.ttft) &&
              (!slo.tpot || std::isnan(out.tpot) || out.tpot <= *slo.tpot) &&
              (!slo.e2e || out.e2e <= *slo.e2e);
  return out;
}

}  // namespace headway::core
