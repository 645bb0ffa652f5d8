#include "model_runner.h"

#include <algorithm>
#include <cmath>
#include <headway/sdk/model.hpp>
#include <limits>
#include <string>

namespace headway::conformance {

ModelRunner::ModelRunner(const core::PluginChoice& choice, const std::string& config_dir,
                         uint32_t block_size)
    : block_size_(block_size),
      host_("model", &clock_),
      model_(std::make_unique<core::ModelInstance>(choice, config_dir, host_)) {
  model_->init_kv(kBlocks, block_size_);
}

std::map<uint64_t, SampleOutput> ModelRunner::run(
    const std::vector<Sequence>& sequences, const std::vector<std::vector<SliceSpec>>& batches,
    std::vector<double>* seconds, std::map<uint64_t, std::vector<SampleOutput>>* position_rows,
    std::map<uint64_t, int32_t>* sampled_ids) {
  const hw_model_info& info = model_->info();
  const bool on_request = info.returns_logits == 0 && info.returns_logits_on_request != 0;
  std::map<uint64_t, SampleOutput> outputs;
  for (const std::vector<SliceSpec>& batch : batches) {
    std::vector<hw_model_slice> slices;
    std::vector<uint8_t> wanted;
    for (const SliceSpec& s : batch) {
      const Sequence& q = sequences[s.sequence];
      hw_model_slice slice{};
      slice.request_id = q.id;
      slice.start = s.start;
      slice.tokens = s.tokens;
      slice.token_ids = info.needs_token_ids ? q.tokens.data() + s.start : nullptr;
      slice.block_table = q.blocks.data();
      slice.block_count =
          q.table_blocks != 0 ? q.table_blocks : static_cast<uint32_t>(q.blocks.size());
      slice.sample = s.sample ? 1 : 0;
      slice.temperature = s.temperature;
      slice.top_p = s.top_p;
      slice.top_k = s.top_k;
      slice.min_p = s.min_p;
      slice.seed = s.seed.value_or(q.id);
      slice.output_index = s.output_index;
      slice.all_logits = s.all_logits ? 1 : 0;
      slices.push_back(slice);
      wanted.push_back(on_request && s.sample && s.row_wanted ? 1 : 0);
    }
    const bool any_wanted = std::find(wanted.begin(), wanted.end(), 1) != wanted.end();
    hw_model_batch b{sizeof(hw_model_batch), slices.data(), static_cast<uint32_t>(slices.size()),
                     block_size_, any_wanted ? wanted.data() : nullptr};
    // The rows of slice i, as the host sizes them (sdk::sample_row_wanted reads `wanted`).
    const auto rows_of = [&](uint32_t i) {
      return returns_rows() ? sdk::logits_rows(slices[i], sdk::sample_row_wanted(b, i, info)) : 0u;
    };
    uint32_t rows = 0;
    for (uint32_t i = 0; i < slices.size(); ++i) rows += rows_of(i);
    // One id per slice, and a guard past them (a model writes no entry past them, abi.h).
    constexpr int32_t kSampledGuard = -123456789;
    std::vector<int32_t> sampled(slices.size() + 1, -1);
    sampled.back() = kSampledGuard;
    // One guard row past those asked for, filled with a value no model writes by chance.
    constexpr float kGuard = -1.2345e-30f;
    std::vector<float> logits(returns_rows() ? size_t{rows + 1} * info.vocab : 0, kGuard);
    hw_model_output out{sizeof(hw_model_output),
                        sampled.data(),
                        0.0,
                        rows == 0 ? nullptr : logits.data(),
                        rows,
                        info.vocab};
    model_->forward(b, out);
    if (sampled.back() != kSampledGuard) {
      throw core::Error("forward() wrote past hw_model_output.sampled (one id per slice, " +
                        std::to_string(slices.size()) + " slices)");
    }
    if (!logits.empty() &&
        std::any_of(logits.end() - info.vocab, logits.end(), [](float v) { return v != kGuard; })) {
      throw core::Error(
          "forward() wrote past the " + std::to_string(rows) +
          " logits rows the host asked for (hw_model_output.logits_rows, sdk::logits_rows)");
    }
    for (uint32_t r = 0; r < rows; ++r) {
      const auto first = logits.begin() + size_t{r} * info.vocab;
      const auto last = first + info.vocab;
      if (std::all_of(first, last, [](float v) { return v == kGuard; })) {
        throw core::Error("forward() wrote nothing to logits row " + std::to_string(r) +
                          " of the " + std::to_string(rows) +
                          " the batch asks for (still the suite's guard)");
      }
      // -inf is a masked token (a vocabulary's padding); NaN, +inf or a row of -inf only leave
      // the sampler nothing to draw from.
      const auto bad = std::find_if(
          first, last, [](float v) { return std::isnan(v) || (v > 0 && std::isinf(v)); });
      if (bad != last || std::all_of(first, last, [](float v) { return std::isinf(v); })) {
        throw core::Error("forward() wrote a non-finite logit in row " + std::to_string(r) +
                          (bad != last ? " (" + std::string(std::isnan(*bad) ? "NaN" : "+inf") +
                                             " for token " + std::to_string(bad - first) + ")"
                                       : " (every token -inf)") +
                          ": the sampler has nothing to draw from");
      }
    }
    if (seconds != nullptr) seconds->push_back(out.seconds);
    uint32_t row = 0;
    const auto row_at = [&](uint32_t r) {
      return SampleOutput(logits.begin() + size_t{r} * info.vocab,
                          logits.begin() + size_t{r + 1} * info.vocab);
    };
    for (size_t i = 0; i < batch.size(); ++i) {
      const uint64_t id = sequences[batch[i].sequence].id;
      const uint32_t rows_of_slice = rows_of(static_cast<uint32_t>(i));
      if (batch[i].all_logits && position_rows != nullptr) {
        for (uint32_t t = 0; t < rows_of_slice; ++t)
          (*position_rows)[id].push_back(row_at(row + t));
      }
      row += rows_of_slice;
      if (!batch[i].sample) continue;
      if (sampled_ids != nullptr && info.returns_logits == 0) (*sampled_ids)[id] = sampled[i];
      // The slice's last row is the sampled one.
      outputs[id] = sdk::sample_row_wanted(b, static_cast<uint32_t>(i), info)
                        ? row_at(row - 1)
                        : SampleOutput{static_cast<float>(sampled[i])};
    }
  }
  return outputs;
}

double relative_difference(const SampleOutput& a, const SampleOutput& b) {
  if (a.size() != b.size() || a.empty()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, scale = 1.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;  // equal, -inf (a masked token) included
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]))
      return std::numeric_limits<double>::infinity();
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(
        {scale, static_cast<double>(std::fabs(a[i])), static_cast<double>(std::fabs(b[i]))});
  }
  return diff / scale;
}

}  // namespace headway::conformance
