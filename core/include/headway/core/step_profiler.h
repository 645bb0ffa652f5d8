// Measures a model's step time on a grid of step shapes and fits the sim model's linear cost mode
// (plugins/models/sim/fitted_cost.h) to it: what `headway profile` runs, so that `simulate` can
// predict this machine. Method and figures: docs/profiling.md.
//
// The fitted model: seconds = overhead + a * tokens + b * sampled + c * attention_pairs
// + d * kv_tokens, with the sums over a step's slices defined exactly as the sim model's StepLoad
// defines them (recomputed here because the host does not link plugin code).
//
// Ownership: every function takes its inputs by reference and returns values; the ModelInstance is
// borrowed. Threading: a profile runs on the calling thread, which calls the model; the model must
// not be used by another thread meanwhile.
#pragma once

#include <headway/abi.h>
#include <headway/core/plugin_instances.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace headway::core {

// Positions [start, start + tokens) of one synthetic request; sample: run the LM head on the last.
struct ProfileSlice {
  uint32_t start = 0;
  uint32_t tokens = 0;
  bool sample = false;
};

struct ProfileShape {
  std::string label;  // "prefill 512 @ 0", "decode 8 x @ 1024", "mixed …", for the report
  std::vector<ProfileSlice> slices;
};

// The regressors of the fitted model for one step; index order is CostCoefficients' order.
struct StepFeatures {
  double tokens = 0;           // positions computed (rows through every linear layer)
  double sampled = 0;          // sampling slices (rows through the LM head)
  double attention_pairs = 0;  // sum of tokens * (start + (tokens + 1) / 2)
  double kv_tokens = 0;        // sum of start + tokens
  static StepFeatures of(std::span<const ProfileSlice> slices);
  // Every slice computes one position and samples it (no prompt chunk in the step): each slice
  // adds 1 to both counts, and only a decode adds as many to one as to the other.
  bool decode_only() const { return tokens == sampled; }
};

struct CostCoefficients {
  double overhead_s = 0;
  double per_token_s = 0;
  double per_sampled_token_s = 0;
  double per_attention_pair_s = 0;
  double per_kv_token_s = 0;
  double predict(const StepFeatures& f) const;
};

struct ProfileMeasurement {
  ProfileShape shape;
  StepFeatures features;
  double median_s = 0;     // median over the repetitions
  double predicted_s = 0;  // filled in by fit_cost
};

struct CostFit {
  CostCoefficients coefficients;
  double median_relative_error = 0;  // |predicted - measured| / measured over the grid
  double max_relative_error = 0;
};

// The grid: prefill chunks from position 0 and after cached prefixes, decode batches of 1..32 at
// several contexts, and mixed steps (a chunk beside decodes, as a chunked scheduler builds them).
// Shapes whose slices pass max_model_len or whose KV blocks (of block_size tokens) exceed
// kv_capacity_tokens are left out. quick: a reduced grid (a few seconds on a small model), for
// tests. The full grid's contexts stop at 4,096 unless deep_context is larger: then prefill
// chunks (32 to 2,048 tokens) and decode batches (1, 8, 32) also run at contexts 8,192, 16,384,
// ... below deep_context, for workloads whose long prompts reach there (attention's cost per
// pair changes with depth on a GPU, which a grid of shallow shapes does not see).
std::vector<ProfileShape> profile_grid(bool quick, uint32_t max_model_len,
                                       uint64_t kv_capacity_tokens, uint32_t block_size,
                                       uint32_t deep_context = 0);

struct ProfileOptions {
  uint32_t block_size = 16;  // tokens per KV block, as the engine would use
  int repetitions = 5;       // timed runs per shape after one warm-up; the median is kept
  // Shapes whose warm-up takes longer than this get 3 repetitions: their noise is relatively
  // small and they dominate the run time.
  double slow_shape_s = 0.25;
  std::function<void(const ProfileMeasurement&)> on_shape;  // progress; may be empty
};

// Initialises the model's KV cache (as many blocks as the largest shape needs) and times
// forward() on every shape with synthetic token ids and block tables from a bump allocator over
// those blocks. A model that reports durations (a simulated one) is measured by what it reports;
// a real one by the wall clock around forward(). Throws Error when the model fails or no shape
// fits.
std::vector<ProfileMeasurement> profile_model(ModelInstance& model,
                                              std::span<const ProfileShape> shapes,
                                              const ProfileOptions& options);

// Non-negative least squares on the relative error (each row weighted by 1 / measured time, so a
// 5 ms decode step counts as much as a 3 s prefill), solved exactly by trying every subset of
// active terms. Fills each measurement's predicted_s. Throws Error with fewer measurements than
// terms or with a non-positive measured time.
CostFit fit_cost(std::span<ProfileMeasurement> measurements);

struct CostFileInfo {
  std::string source;      // the deployment file profiled, or the step trace fitted
  std::string model_name;  // the model plugin's short name
  std::string cpu;         // CPU model name
  int threads = 0;         // threads the model ran with (0: unknown)
  unsigned cores = 0;      // hardware threads of the machine
  std::string date;        // ISO 8601, UTC
  bool quick = false;
  // Fitted from a step trace's steps rather than a timed grid: the machine the trace was recorded
  // on is not known, so the file has no [machine] table. (write_cost_file leaves it out as well for
  // a model that reports its own step times, hw_model_info::reports_duration, from `info`.)
  bool from_step_trace = false;
  std::string coverage;  // the range of shapes fitted, written as a comment ("" for none)
};

// The CPU model name from /proc/cpuinfo ("unknown" when unavailable) and the current UTC time in
// ISO 8601, for CostFileInfo.
std::string cpu_model_name();
std::string utc_now_iso8601();

// Writes the cost file the sim model reads with `cost_file` (format documented in
// plugins/models/sim/fitted_cost.h and docs/profiling.md), plus the measurements as a comment
// table (past 100 of them, the 100 with the largest errors). Throws Error naming the file when it
// cannot be written.
void write_cost_file(const std::filesystem::path& file, const CostFit& fit,
                     std::span<const ProfileMeasurement> measurements, const hw_model_info& info,
                     const CostFileInfo& about);

}  // namespace headway::core
