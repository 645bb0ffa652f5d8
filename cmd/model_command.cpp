#include "model_command.h"

#include <fmt/format.h>
#include <headway/core/error.h>

#include <headway/sdk/status.hpp>
#include <iostream>

#include "positive.h"
#include "tiny_checkpoint.h"

namespace headway::cmd {

CLI::App* add_model_command(CLI::App& app, ModelArgs& args) {
  CLI::App* model = app.add_subcommand("model", "Create model checkpoints");
  model->require_subcommand(1);
  args.make_tiny = model->add_subcommand(
      "make-tiny",
      "Write a deterministic random-weight Llama (or Qwen 2/3) checkpoint (config.json, "
      "model.safetensors, byte-level tokenizer.json) that the cpu model serves");
  CLI::App* c = args.make_tiny;
  c->add_option("--out", args.out, "Checkpoint directory to write (created if missing)")
      ->required();
  c->add_option("--layers", args.layers, "Transformer layers (default 8)")->check(kPositive);
  c->add_option("--hidden", args.hidden, "Hidden size (default 512)")->check(kPositive);
  c->add_option("--heads", args.heads, "Attention heads (default 8)")->check(kPositive);
  c->add_option("--kv-heads", args.kv_heads, "Key/value heads (default 4)")->check(kPositive);
  c->add_option("--ffn", args.ffn, "MLP intermediate size (default 1408)")->check(kPositive);
  c->add_option("--vocab", args.vocab, "Vocabulary size, at least 259 (default 320)")
      ->check(kPositive);
  c->add_option("--seed", args.seed, "Seed of the random weights (default 0)");
  c->add_option("--dtype", args.dtype, "Stored weight dtype")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  c->add_flag("--tie-embeddings", args.tie_embeddings, "Share the embedding table as LM head");
  c->add_option("--architecture", args.architecture,
                "llama (default), qwen2 (biases on q, k, v) or qwen3 (per-head q/k norms)")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3"}));
  c->add_flag("--quiet", args.quiet, "Print nothing on success");
  return model;
}

int run_model(const ModelArgs& args) {
  models::cpu::TinyModelSpec spec;
  if (args.layers) spec.layers = args.layers;
  if (args.hidden) spec.hidden = args.hidden;
  if (args.heads) spec.heads = args.heads;
  if (args.kv_heads) spec.kv_heads = args.kv_heads;
  if (args.ffn) spec.ffn = args.ffn;
  if (args.vocab) spec.vocab = args.vocab;
  spec.seed = args.seed;
  spec.tie_word_embeddings = args.tie_embeddings;
  spec.architecture = args.architecture;
  spec.dtype = args.dtype == "f32"    ? models::cpu::DType::kF32
               : args.dtype == "bf16" ? models::cpu::DType::kBF16
                                      : models::cpu::DType::kF16;
  try {
    models::cpu::write_tiny_checkpoint(spec, args.out);
  } catch (const sdk::Error& e) {
    throw core::Error(e.what(), e.code());
  }
  if (!args.quiet) {
    std::cout << fmt::format(
        "wrote {}: {} {} layers, hidden {}, {}/{} heads, ffn {}, vocab {}, {} weights, {:.1f}M "
        "parameters\n",
        args.out, spec.architecture, spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.ffn,
        spec.vocab, args.dtype, models::cpu::parameter_count(spec) / 1e6);
  }
  return 0;
}

}  // namespace headway::cmd
