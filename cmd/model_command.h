// `headway model make-tiny --out DIR [--layers N --hidden N --heads N --kv-heads N --ffn N
//  --vocab N --seed N --dtype f32|f16|bf16]`: writes the built-in random-weight Llama checkpoint
// (plugins/models/cpu/tiny_checkpoint.h) that the default deployment serves.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace headway::cmd {

struct ModelArgs {
  std::string out;
  uint32_t layers = 0;  // 0 (not given; a given value must be > 0): the built-in default
  uint32_t hidden = 0;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t ffn = 0;
  uint32_t vocab = 0;
  uint64_t seed = 0;
  std::string dtype = "f16";
  std::string architecture = "llama";
  bool tie_embeddings = false;
  bool quiet = false;
  CLI::App* make_tiny = nullptr;
};

// Registers `model` and its subcommands on `app`; `args` must outlive parsing. Main thread only.
CLI::App* add_model_command(CLI::App& app, ModelArgs& args);

// Runs the parsed subcommand. Throws core::Error (naming the field or file) on invalid arguments
// or I/O failure; returns the exit code otherwise.
int run_model(const ModelArgs& args);

}  // namespace headway::cmd
