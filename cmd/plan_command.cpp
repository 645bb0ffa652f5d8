#include "plan_command.h"

#include <fmt/format.h>
#include <headway/core/error.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hf_config.h"
#include "planner.h"
#include "positive.h"
#include "presets.h"

namespace headway::cmd {
namespace {

namespace sim = headway::models::sim;

constexpr double kGB = 1e9;

std::string gb(double bytes) { return fmt::format("{:.2f}", bytes / kGB); }

std::string preset_names_of_models() {
  std::string names;
  for (const sim::ModelPreset& preset : sim::model_presets()) {
    names += (names.empty() ? "" : ", ") + std::string(preset.name);
  }
  return names;
}

// A preset name, or else a path to a config.json (anything with a slash or a .json suffix, or an
// existing file).
struct ResolvedModel {
  std::string label;
  sim::HfModel model;
};

ResolvedModel resolve_model(const std::string& model) {
  if (const sim::ModelPreset* preset = sim::find_model_preset(model)) {
    sim::HfModel m;
    m.shape = preset->shape;
    m.max_len_source = "the preset's max_model_len";
    return {std::string(preset->name), std::move(m)};
  }
  const std::filesystem::path path(model);
  const bool looks_like_path = model.find('/') != std::string::npos ||
                               path.extension() == ".json" || std::filesystem::exists(path);
  if (!looks_like_path) {
    throw core::Error("--model: unknown model preset '" + model + "' (known: " +
                      preset_names_of_models() + "; or give the path of a config.json)");
  }
  try {
    return {path.string(), sim::load_hf_config(path)};
  } catch (const std::invalid_argument& e) {
    throw core::Error(std::string("--model: ") + e.what());
  }
}

uint32_t dtype_bytes(const std::string& dtype) { return dtype == "fp8" ? 1 : 2; }

std::string failure_reason(const sim::DegreeVerdict& v, const sim::PlanInput& in) {
  if (!v.legal()) return "heads: " + v.head_problem;
  const double usable = sim::usable_bytes(in);
  return fmt::format("memory: needs {} GB per GPU, {} GB more than the {} GB it may use",
                     gb(v.memory.total()), gb(v.memory.total() - usable), gb(usable));
}

void print_breakdown(const sim::DegreeVerdict& v, const sim::PlanInput& in) {
  const sim::MemoryBreakdown& m = v.memory;
  std::printf("  memory per GPU (GB)\n");
  std::printf("    weights          %9s\n", gb(m.weights).c_str());
  std::printf("    KV cache         %9s   (%u x %llu tokens x %llu bytes/token)\n",
              gb(m.kv_cache).c_str(), in.concurrency,
              static_cast<unsigned long long>(v.tokens_per_request),
              static_cast<unsigned long long>(v.kv_bytes_per_token));
  std::printf("    activations      %9s   (estimate: a step of %u tokens, logits of %u rows)\n",
              gb(m.activations).c_str(), in.max_num_batched_tokens, in.max_num_seqs);
  std::printf(
      "    runtime reserve  %9s   (estimates: CUDA context %s, cuBLAS %s, NCCL %s, CUDA graphs "
      "%s)\n",
      gb(m.runtime_reserve()).c_str(), gb(m.cuda_context).c_str(), gb(m.cublas_workspace).c_str(),
      gb(m.nccl_buffers).c_str(), gb(m.cuda_graphs).c_str());
  const double usable = sim::usable_bytes(in);
  std::printf("    total            %9s   of %s usable (%s to spare)\n", gb(m.total()).c_str(),
              gb(usable).c_str(), gb(usable - m.total()).c_str());
  std::printf("  max concurrency at context %u: %llu\n", in.context,
              static_cast<unsigned long long>(v.max_concurrency));
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "plan", "Smallest tensor-parallel degree that fits a model and its KV cache on one node");
  cmd->add_option("--model", args.model,
                  "Model preset (" + preset_names_of_models() +
                      ") or the path of a Hugging Face config.json")
      ->required();
  cmd->add_option("--gpu", args.gpu, "GPU preset")
      ->required()
      ->check(CLI::IsMember({"h100", "h200"}));
  cmd->add_option("--context", args.context, "Tokens per request (prompt + output): 4096, 8k, 128k")
      ->required()
      ->transform(kTokenCount)
      ->check(CLI::Range(1u, 1u << 30));
  cmd->add_option("--concurrency", args.concurrency, "Requests of that context held at once")
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--dtype", args.dtype, "Weights of the linear layers")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  cmd->add_option("--kv-dtype", args.kv_dtype, "KV cache elements (auto: as --dtype)")
      ->check(CLI::IsMember({"auto", "bf16", "fp8"}));
  cmd->add_option("--max-num-batched-tokens", args.max_num_batched_tokens,
                  "Tokens of one step, for the activation estimate")
      ->check(CLI::Range(1u, 1u << 24));
  cmd->add_option("--max-num-seqs", args.max_num_seqs,
                  "Sampled rows of one step, for the logits estimate")
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--gpu-memory-utilization", args.gpu_memory_utilization,
                  "Share of each GPU's memory the serving process may use in all, as vLLM's flag "
                  "and the cuda model's gpu_memory_fraction")
      ->check(kPositive)  // first: the range's own message takes "0.9x" for a number
      ->check(CLI::Range(0.05, 1.0));
  cmd->add_option("--gpu-memory-gb", args.gpu_memory_gb,
                  "Each GPU's memory in GB (1e9 bytes) in place of the preset's marketed figure: "
                  "what CUDA reports (nvidia-smi's total MiB x 0.001048576), for vLLM's "
                  "arithmetic, which takes --gpu-memory-utilization of that")
      ->check(kPositive)  // first: the range's own message takes "0.9x" for a number
      ->check(CLI::Range(1.0, 10000.0));
  return cmd;
}

int run_plan(const PlanArgs& args) {
  const sim::GpuPreset* gpu = sim::find_gpu_preset(args.gpu);
  if (gpu == nullptr) throw core::Error("--gpu: unknown GPU preset '" + args.gpu + "'");
  if (args.max_num_batched_tokens < args.max_num_seqs) {
    // vLLM refuses the same: a step must have room for a token of every sequence it runs.
    throw core::Error(fmt::format(
        "--max-num-batched-tokens {} is below --max-num-seqs {}: a step could not give each of "
        "its sequences a token",
        args.max_num_batched_tokens, args.max_num_seqs));
  }
  const ResolvedModel resolved = resolve_model(args.model);
  const sim::HfModel& model = resolved.model;
  if (model.shape.max_model_len > 0 && args.context > model.shape.max_model_len) {
    throw core::Error(fmt::format("--context {} exceeds the model's maximum of {} tokens ({})",
                                  args.context, model.shape.max_model_len, model.max_len_source));
  }

  sim::PlanInput in;
  in.model = model.shape;
  in.hbm_bytes =
      args.gpu_memory_gb > 0 ? args.gpu_memory_gb * 1e9 : sim::to_gpu_spec(*gpu).hbm_bytes;
  in.gpu_memory_utilization = args.gpu_memory_utilization;
  in.context = args.context;
  in.concurrency = args.concurrency;
  in.weight_bytes = dtype_bytes(args.dtype);
  in.kv_bytes = args.kv_dtype == "auto" ? in.weight_bytes : dtype_bytes(args.kv_dtype);
  in.max_num_batched_tokens = args.max_num_batched_tokens;
  in.max_num_seqs = args.max_num_seqs;
  sim::Plan plan;
  try {
    plan = sim::plan_tensor_parallel(in);
  } catch (const std::invalid_argument& e) {
    throw core::Error(e.what());
  }

  const double parameters = sim::parameter_counts(in.model).total(in.model.layers);
  std::printf(
      "%s: %.2fB parameters, weights %s, KV cache %s, on %s (%s GB per GPU, %s usable at "
      "gpu_memory_utilization %.2f)\n",
      resolved.label.c_str(), parameters / 1e9, args.dtype.c_str(),
      in.kv_bytes == 1 ? "fp8" : "bf16", args.gpu.c_str(), gb(in.hbm_bytes).c_str(),
      gb(sim::usable_bytes(in)).c_str(), in.gpu_memory_utilization);
  std::printf("context %u tokens x concurrency %u\n", in.context, in.concurrency);
  std::vector<std::string> notes = model.notes;
  if (model.sliding_window > 0 && in.context > model.sliding_window) {
    notes.push_back(fmt::format(
        "sliding_window = {}: the KV cache is counted for full attention on every layer; layers "
        "that attend to a window keep about that many tokens (vLLM), so the KV figures are high "
        "and a smaller degree may fit",
        model.sliding_window));
  }
  if (in.concurrency > in.max_num_seqs) {
    notes.push_back(fmt::format(
        "--concurrency {} is above --max-num-seqs {}: a server runs (and holds KV for) at most "
        "max_num_seqs requests at once, the others wait without KV; the plan sizes KV for all {}",
        in.concurrency, in.max_num_seqs, in.concurrency));
  }
  if (args.kv_dtype == "auto" && args.dtype == "fp8") {
    notes.push_back(
        "KV cache fp8 because --kv-dtype auto follows --dtype here; vLLM's --kv-cache-dtype auto "
        "keeps an FP8 checkpoint's cache in BF16 (pass --kv-dtype bf16 for that)");
  }
  for (const std::string& note : notes) std::printf("note: %s\n", note.c_str());
  std::printf("\n");

  if (plan.chosen < 0) {
    std::printf("no tensor-parallel degree up to 8 fits:\n");
    for (const sim::DegreeVerdict& v : plan.degrees) {
      std::printf("  tp=%u: %s\n", v.tensor_parallel, failure_reason(v, in).c_str());
    }
    std::fprintf(stderr,
                 "headway plan: %s does not fit on up to 8 x %s at context %u x concurrency %u\n",
                 resolved.label.c_str(), args.gpu.c_str(), in.context, in.concurrency);
    return 1;
  }
  const sim::DegreeVerdict& chosen = plan.degrees[static_cast<size_t>(plan.chosen)];
  std::printf("tensor_parallel = %u\n", chosen.tensor_parallel);
  print_breakdown(chosen, in);
  if (plan.chosen > 0) {
    std::printf("smaller degrees:\n");
    for (int i = 0; i < plan.chosen; ++i) {
      const sim::DegreeVerdict& v = plan.degrees[static_cast<size_t>(i)];
      std::printf("  tp=%u: %s\n", v.tensor_parallel, failure_reason(v, in).c_str());
    }
  }
  return 0;
}

}  // namespace headway::cmd
