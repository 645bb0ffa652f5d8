// Service-level objectives (SLOs) given on the command line, e.g. `--slo ttft=2s,tpot=100ms`, and
// the two ways Headway judges a run against them:
//
//   per request (goodput): a request meets the SLO when it finished and every given term holds
//     for it: TTFT <= ttft, TPOT <= tpot, E2E <= e2e (definitions as in report.h). A request with
//     fewer than 2 output tokens has no TPOT and meets a tpot term by definition. Goodput =
//     requests meeting the SLO / the report's span_seconds (requests/s).
//   at p99 (capacity): the p99 over ALL requests of each given metric is within its bound. An
//     unfinished request counts as an infinitely late one, so a run that leaves more than 1% of
//     its requests unfinished never holds.
//
// Only per-request terms exist (ttft, tpot, e2e): ITL is a property of a stream's gaps, not of a
// request, and is judged through tpot. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headway/core/request_record.h"

namespace headway::core {

struct Slo {
  std::optional<double> ttft, tpot, e2e;  // seconds; absent terms are not judged

  bool empty() const { return !ttft && !tpot && !e2e; }
  // Canonical text, e.g. "ttft=2s,tpot=100ms"; parse_slo(text()) gives the same Slo.
  std::string text() const;
};

// The SLO of the HOL study (issue 3): ttft p99 <= 2 s, tpot p99 <= 100 ms.
Slo default_slo();

// Parses "name=value[,name=value...]" with names ttft, tpot, e2e and values a positive number
// followed by a unit s, ms or us ("2s", "100ms", "1.5s"). Throws Error naming the bad term and
// what is allowed (unknown name, missing or unknown unit, non-positive value, repeated name).
Slo parse_slo(std::string_view text);

// Per-request judgement (see above).
bool meets_slo(const Slo& slo, const RequestRecord& record);

struct Goodput {
  std::string slo;            // Slo::text() it was computed for
  size_t met = 0;             // requests meeting every term
  size_t requests = 0;        // requests judged (every record)
  double requests_per_s = 0;  // met / span_seconds; 0 when the span is not positive
};

// `span_seconds` is the denominator, normally Report::span_seconds.
Goodput goodput(const Slo& slo, const std::vector<RequestRecord>& records, double span_seconds);

// p99 over all requests of each metric the SLO names (NaN for terms it does not name), and
// whether every named p99 is within its bound.
struct SloP99 {
  double ttft, tpot, e2e;
  bool holds = false;
};
SloP99 p99_against_slo(const Slo& slo, const std::vector<RequestRecord>& records);

// "1.50s", "100ms", "20us": the shortest exact text parse_slo reads back for a duration.
std::string slo_duration_text(double seconds);

}  // namespace headway::core
