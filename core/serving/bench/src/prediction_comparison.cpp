#include "headway/serving/bench/prediction_comparison.h"

#include <fmt/format.h>

#include <cmath>

namespace headway::serving::bench {

namespace {

PredictedFigure figure(double predicted, double measured) {
  PredictedFigure f{predicted, measured, std::nullopt};
  if (std::isfinite(predicted) && std::isfinite(measured) && measured != 0) {
    f.relative_error = (predicted - measured) / measured;
  }
  return f;
}

PredictionRow row(const core::ClassReport& measured, const core::ClassReport* predicted) {
  const core::ClassReport empty;
  const core::ClassReport& p = predicted ? *predicted : empty;
  return {measured.name, figure(p.ttft.p50, measured.ttft.p50),
          figure(p.ttft.p99, measured.ttft.p99), figure(p.itl.p50, measured.itl.p50),
          figure(p.itl.p99, measured.itl.p99)};
}

std::string cell(const PredictedFigure& f) {
  const std::string error =
      f.relative_error ? fmt::format("{:+.0f}%", *f.relative_error * 100) : std::string("-");
  return fmt::format("{:>9} {:>9} {:>6}", core::duration_text(f.predicted),
                     core::duration_text(f.measured), error);
}

nlohmann::json figure_json(const PredictedFigure& f) {
  return {{"predicted", core::number_or_null(f.predicted)},
          {"measured", core::number_or_null(f.measured)},
          {"relative_error", core::number_or_null(f.relative_error)}};
}

}  // namespace

std::vector<PredictionRow> compare_prediction(const core::Report& measured,
                                              const core::Report& predicted) {
  std::vector<PredictionRow> rows;
  for (const core::ClassReport& m : measured.classes) {
    const core::ClassReport* p = nullptr;
    for (const core::ClassReport& candidate : predicted.classes) {
      if (candidate.name == m.name) p = &candidate;
    }
    rows.push_back(row(m, p));
  }
  rows.push_back(row(measured.overall, &predicted.overall));
  return rows;
}

void print_prediction(std::ostream& out, const std::string& deployment,
                      const std::vector<PredictionRow>& rows) {
  size_t width = std::string_view("overall").size();
  for (const PredictionRow& r : rows) width = std::max(width, r.name.size());
  width += 2;
  out << fmt::format("prediction by {} beside measurement (error = predicted / measured - 1)\n",
                     deployment);
  const std::string group = fmt::format("{:>9} {:>9} {:>6}", "predicted", "measured", "error");
  out << fmt::format("{:<{}}  {:<26}  {:<26}  {:<26}  {:<26}\n", "", width, "TTFT p50", "TTFT p99",
                     "ITL p50", "ITL p99");
  out << fmt::format("{:<{}}  {}  {}  {}  {}\n", "class", width, group, group, group, group);
  for (const PredictionRow& r : rows) {
    out << fmt::format("{:<{}}  {}  {}  {}  {}\n", r.name, width, cell(r.ttft_p50),
                       cell(r.ttft_p99), cell(r.itl_p50), cell(r.itl_p99));
  }
}

nlohmann::json prediction_to_json(const std::vector<PredictionRow>& rows) {
  nlohmann::json classes = nlohmann::json::array();
  for (const PredictionRow& r : rows) {
    classes.push_back({{"name", r.name},
                       {"ttft_p50", figure_json(r.ttft_p50)},
                       {"ttft_p99", figure_json(r.ttft_p99)},
                       {"itl_p50", figure_json(r.itl_p50)},
                       {"itl_p99", figure_json(r.itl_p99)}});
  }
  return classes;
}

}  // namespace headway::serving::bench
