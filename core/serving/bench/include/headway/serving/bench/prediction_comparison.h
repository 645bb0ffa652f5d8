// Prediction beside measurement: the simulator's report of a workload on a deployment (what
// `headway simulate` predicts) next to the report `headway bench` measured on a server, per class
// and overall, for p50 and p99 of TTFT and ITL, with the relative error of the prediction,
// (predicted - measured) / measured.
//
// Pure functions; thread-safe.
#pragma once

#include <headway/core/report.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace headway::serving::bench {

struct PredictedFigure {
  double predicted = core::LatencySummary::kNaN, measured = core::LatencySummary::kNaN;
  std::optional<double> relative_error;  // absent when either is missing or measured is 0
};

struct PredictionRow {
  std::string name;  // class name, or "overall"
  PredictedFigure ttft_p50, ttft_p99, itl_p50, itl_p99;
};

// One row per class of `measured` (matched to `predicted` by name; a class the prediction lacks
// gets no predicted figures), then "overall".
std::vector<PredictionRow> compare_prediction(const core::Report& measured,
                                              const core::Report& predicted);

void print_prediction(std::ostream& out, const std::string& deployment,
                      const std::vector<PredictionRow>& rows);

nlohmann::json prediction_to_json(const std::vector<PredictionRow>& rows);

}  // namespace headway::serving::bench
