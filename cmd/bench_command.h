// `headway bench`: measures a running OpenAI-compatible server (Headway's `serve`, vLLM, ...)
// the way `headway simulate` predicts it. The same workload TOML gives the same requests (lengths,
// classes, arrival times); each is sent at its arrival time as a streamed /v1/completions request
// and measured on the client; the report has simulate's shape (per-class TTFT/ITL/TPOT/E2E, HOL
// and stall factors, JSON, plot) plus the failures per class and the load generator's lateness.
// With --predict-config it also simulates the workload on a deployment and prints prediction
// beside measurement. docs/bench.md has the details.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headway::cmd {

struct BenchArgs {
  std::string url;       // http://host:port[/prefix]
  std::string workload;  // workload TOML
  std::string model;     // empty: the first model GET /v1/models lists
  std::string api_key_file;
  std::string out;                 // report JSON
  std::string plot;                // PNG file, or a directory to write bench.png into
  std::optional<std::string> slo;  // unset: core::default_slo(); set but empty is refused
  std::string predict_config;
  std::vector<std::string> plugin_dirs;
  size_t max_concurrency = 256;
  size_t num_requests = 0;       // 0: all
  double duration = 0;           // seconds; 0: all
  std::optional<uint64_t> seed;  // replaces the workload file's seed (as `simulate --seed`)
  double rate_scale = 1;         // arrival rate times this (core::with_rate_factor)
  uint32_t vocab = 0;            // 0: from GET /v1/models, else a range every tokenizer has
  double timeout = 600;          // seconds of silence before a stream fails
  bool hol_baseline = false;
  bool quiet = false;
};

CLI::App* add_bench_command(CLI::App& app, BenchArgs& args);
int run_bench(const BenchArgs& args);

}  // namespace headway::cmd
