// Runs a model plugin on hand-made batches, outside any engine: the model profile needs control of
// block tables and slice boundaries that an engine would choose itself.
//
// Ownership: a ModelRunner owns its model instance. Threading: one thread.
#pragma once

#include <headway/conformance/suite.h>
#include <headway/core/clock.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace headway::conformance {

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;
  std::vector<uint32_t> blocks;  // block table covering all tokens
  // The table's length as the model is told it (block_count); 0: all of `blocks`. Entries past it
  // are guards: a model that reads past its table finds a block id there, not memory past the
  // array.
  uint32_t table_blocks = 0;
};

struct SliceSpec {
  size_t sequence = 0;  // index into the sequences
  uint32_t start = 0;
  uint32_t tokens = 0;
  bool sample = false;
  bool all_logits = false;  // a logits row per position (hw_model_slice.all_logits)
  // With a model that returns logits on request (ABI 1.5): ask for the sampled row
  // (hw_model_batch.logits_wanted); without it the slice's output is the model's sampled id.
  bool row_wanted = true;
  // How a sampling slice samples (hw_model_slice's fields); greedy unless a test says otherwise.
  float temperature = 0.0f;
  float top_p = 1.0f;
  uint32_t top_k = 0;
  float min_p = 0.0f;
  std::optional<uint64_t> seed = std::nullopt;  // the sequence's id when not given
  uint32_t output_index = 0;
};

// What a sampling slice produced: the logits row, or the sampled id as a one-element row.
using SampleOutput = std::vector<float>;

class ModelRunner {
 public:
  static constexpr uint32_t kBlockSize = 16;
  static constexpr uint32_t kBlocks = 32;

  // Creates the model and its KV cache of kBlocks blocks of `block_size` tokens (the deployment's
  // block_size, 16 unless a test asks for another). Throws core::Error.
  ModelRunner(const core::PluginChoice& choice, const std::string& config_dir,
              uint32_t block_size = kBlockSize);
  const hw_model_info& info() const { return model_->info(); }
  // Whether the model hands logits rows to the host (for every sampling slice, or on request).
  bool returns_rows() const {
    return info().returns_logits != 0 || info().returns_logits_on_request != 0;
  }
  core::ModelInstance& model() { return *model_; }

  // Runs each batch in turn; returns, per sequence id, the output of its last sampling slice.
  // `seconds` gets each batch's reported duration; `position_rows`, per sequence id, the rows of
  // its all_logits slices in position order; `sampled_ids`, per sequence id, the id the model
  // sampled itself at its last sampling slice (models that sample themselves). Throws
  // core::Error when the model writes past the logits rows the host asked for.
  std::map<uint64_t, SampleOutput> run(
      const std::vector<Sequence>& sequences, const std::vector<std::vector<SliceSpec>>& batches,
      std::vector<double>* seconds = nullptr,
      std::map<uint64_t, std::vector<SampleOutput>>* position_rows = nullptr,
      std::map<uint64_t, int32_t>* sampled_ids = nullptr);

 private:
  uint32_t block_size_;
  core::VirtualClock clock_;
  core::HostServices host_;
  std::unique_ptr<core::ModelInstance> model_;
};

// Greatest absolute difference between two outputs, scaled by the larger magnitude (at least 1);
// infinity when their sizes differ.
double relative_difference(const SampleOutput& a, const SampleOutput& b);

}  // namespace headway::conformance
