// Profiling for the simulator, end to end: `headway model make-tiny`, `headway profile --quick` on
// a CPU deployment of it, then `headway simulate` with a sim model reading the cost file. And the
// fit itself, checked where the truth is known: profiling a sim model whose step times come from a
// hand-written cost file must give back that file's coefficients.
//
// No assertion here is about how fast anything runs; the fit's error bound is a loose sanity check.
#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/step_profiler.h>
#include <sys/wait.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.h"

namespace headway::core {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(HEADWAY_SOURCE_DIR) / "tests/integration/data";

struct TempDir {
  TempDir() : path(fs::temp_directory_path() / ("headway_profile_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

using headway::test::CliRun;
CliRun run(const std::string& args, const fs::path&) { return headway::test::run_cli(args); }

// The same for a command that loads the CPU model: without leak checking, as for every test that
// runs it (HEADWAY_OPENMP_TEST_ENVIRONMENT in tests/CMakeLists.txt: LeakSanitizer's exit-time
// tracer crashes on the OpenMP workers the model leaves parked). ASan's other checks stay on.
CliRun run_cpu_model(const std::string& args) {
  return headway::test::run_program(
      std::string("env ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 ") + HEADWAY_CLI, args);
}

void write(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

std::string sim_deployment(const std::string& model_options) {
  return "name = \"tiny-fitted\"\n[model]\nplugin = \"sim\"\noptions = { " + model_options +
         " }\n[[engines]]\nscheduler = { plugin = \"chunked\", options = { "
         "max_num_batched_tokens = 256 } }\n";
}

// Makes the tiny test model (2 layers, hidden 128) in `dir`/model and a CPU deployment of it,
// cpu.toml, with `scheduler` as its engine's scheduler table; returns the deployment's path.
fs::path tiny_cpu_deployment(const fs::path& dir, const std::string& scheduler) {
  const CliRun r = run("model make-tiny --quiet --out " + (dir / "model").string() +
                           " --layers 2 --hidden 128 --heads 4 --kv-heads 2 --ffn 256",
                       dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  write(dir / "cpu.toml",
        "[model]\nplugin = \"cpu\"\noptions = { path = \"model\", threads = 1, kv_cache_gb = "
        "0.05 }\n[[engines]]\nscheduler = " +
            scheduler + "\n");
  return dir / "cpu.toml";
}

// Simulates profile_small.toml on a sim deployment (sim.toml in `dir`) with `model_options`: every
// one of its 24 requests must finish.
void expect_simulation_finishes(const fs::path& dir, const std::string& model_options) {
  write(dir / "sim.toml", sim_deployment(model_options));
  const fs::path report = dir / "report.json";
  const CliRun r =
      run("simulate --no-baseline --config " + (dir / "sim.toml").string() + " --workload " +
              (kData / "profile_small.toml").string() + " --out " + report.string(),
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["rejected"], 0);
  EXPECT_EQ(j["overall"]["finished"], 24) << j.dump(2);
}

TEST(Profile, TinyCpuModelToFittedSimulation) {
  TempDir dir;
  tiny_cpu_deployment(dir.path, "{ plugin = \"chunked\" }");

  const fs::path cost = dir.path / "cost.toml";
  CliRun r = run_cpu_model("profile --quick --config " + (dir.path / "cpu.toml").string() +
                           " --out " + cost.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("relative error"), std::string::npos) << r.out;

  const toml::table file = toml::parse_file(cost.string());
  EXPECT_EQ(file["format"].value<int64_t>(), 1);
  for (const char* key : {"overhead_s", "per_token_s", "per_sampled_token_s",
                          "per_attention_pair_s", "per_kv_token_s"}) {
    const std::optional<double> value = file["coefficients"][key].value<double>();
    ASSERT_TRUE(value.has_value()) << key;
    EXPECT_GE(*value, 0.0) << key;
  }
  EXPECT_GT(*file["coefficients"]["per_token_s"].value<double>(), 0.0);
  EXPECT_EQ(file["model"]["layers"].value<int64_t>(), 2);
  EXPECT_EQ(file["model"]["hidden"].value<int64_t>(), 128);
  EXPECT_EQ(file["model"]["kv_heads"].value<int64_t>(), 2);
  EXPECT_EQ(file["model"]["vocab"].value<int64_t>(), 320);
  EXPECT_EQ(file["machine"]["threads"].value<int64_t>(), 1);
  // A loose sanity bound: the grid is timed on a shared machine.
  EXPECT_LT(*file["fit"]["median_relative_error"].value<double>(), 0.5);

  expect_simulation_finishes(dir.path, "cost_file = \"cost.toml\"");
  // Beside cost_file, options it replaces are refused, each named: they would be ignored, and the
  // report would be of another deployment than the one written.
  write(dir.path / "sim.toml",
        sim_deployment("cost_file = \"cost.toml\", model = \"llama-3.3-70b\", "
                       "tensor_parallel = 8"));
  const CliRun refused = run("simulate --no-baseline --config " + (dir.path / "sim.toml").string() +
                                 " --workload " + (kData / "profile_small.toml").string(),
                             dir.path);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("model, tensor_parallel are not used"), std::string::npos)
      << refused.err;
}

TEST(Profile, ErrorsNameTheFileAndTheKey) {
  TempDir dir;
  CliRun r = run("profile --quick --config " + (dir.path / "absent.toml").string() + " --out " +
                     (dir.path / "cost.toml").string(),
                 dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("absent.toml"), std::string::npos) << r.err;

  // A missing cost file and a malformed one, through the sim plugin as the engine loads it.
  write(dir.path / "sim.toml", sim_deployment("cost_file = \"nowhere.toml\""));
  r = run("simulate --no-baseline --config " + (dir.path / "sim.toml").string() + " --workload " +
              (kData / "profile_small.toml").string(),
          dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nowhere.toml: cannot open the cost file"), std::string::npos) << r.err;

  write(dir.path / "bad.toml", "format = 1\n[coefficients]\noverhead_s = 0.001\n");
  write(dir.path / "sim.toml", sim_deployment("cost_file = \"bad.toml\""));
  r = run("simulate --no-baseline --config " + (dir.path / "sim.toml").string() + " --workload " +
              (kData / "profile_small.toml").string(),
          dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("bad.toml: coefficients.per_token_s is missing"), std::string::npos)
      << r.err;

  // Neither a deployment to time nor a trace to fit; both at once; a trace that is not one.
  r = run("profile --out " + (dir.path / "cost.toml").string(), dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("give --config"), std::string::npos) << r.err;
  r = run("profile --config " + (dir.path / "sim.toml").string() + " --from-step-trace " +
              (dir.path / "sim.toml").string() + " --out " + (dir.path / "cost.toml").string(),
          dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
  r = run("profile --from-step-trace " + (dir.path / "sim.toml").string() + " --out " +
              (dir.path / "cost.toml").string(),
          dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("sim.toml:1: not a JSON object"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.path / "cost.toml"));

  // Too few steps for five coefficients; the trace itself as --out (left as it was).
  const fs::path trace = dir.path / "steps.jsonl";
  std::string text =
      R"({"engine":0,"model":{"plugin":"cpu","layers":2,"hidden":128,"heads":4,"kv_heads":2,)"
      R"("head_dim":32,"vocab":320,"max_model_len":2048,"kv_capacity_tokens":4096,)"
      R"("kv_bytes_per_token":512,"block_size":16}})"
      "\n";
  for (int step = 0; step < 4; ++step) {
    text += R"({"engine":0,"step":)" + std::to_string(step) +
            R"(,"t":0,"duration":0.01,"slices":[{"request":1,"start":)" +
            std::to_string(10 + step) + R"(,"tokens":1,"kind":"decode","sample":true}]})" + "\n";
  }
  write(trace, text);
  r = run(
      "profile --from-step-trace " + trace.string() + " --out " + (dir.path / "cost.toml").string(),
      dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("steps.jsonl: 3 steps to fit"), std::string::npos) << r.err;
  r = run("profile --from-step-trace " + trace.string() + " --out " + trace.string(), dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is also --from-step-trace"), std::string::npos) << r.err;
  std::ifstream kept(trace);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), text);
}

// A hand-written cost file: a sim model reading it reports step times exactly linear in the
// features, so a fit of its steps must give these coefficients back.
const char* const kKnownCost = R"(format = 1
[coefficients]
overhead_s = 2e-3
per_token_s = 5e-5
per_sampled_token_s = 1e-4
per_attention_pair_s = 2e-9
per_kv_token_s = 3e-7
[model]
layers = 4
hidden = 256
heads = 4
kv_heads = 2
head_dim = 64
vocab = 320
max_model_len = 8192
kv_capacity_tokens = 200000
kv_bytes_per_token = 4096
)";

void expect_known_coefficients(const CostCoefficients& c, double tolerance) {
  EXPECT_NEAR(c.overhead_s, 2e-3, 2e-3 * tolerance);
  EXPECT_NEAR(c.per_token_s, 5e-5, 5e-5 * tolerance);
  EXPECT_NEAR(c.per_sampled_token_s, 1e-4, 1e-4 * tolerance);
  EXPECT_NEAR(c.per_attention_pair_s, 2e-9, 2e-9 * tolerance);
  EXPECT_NEAR(c.per_kv_token_s, 3e-7, 3e-7 * tolerance);
}

// Profiling a model that reports known step times must recover them.
TEST(Profile, FitRecoversKnownCoefficients) {
  TempDir dir;
  write(dir.path / "known.toml", kKnownCost);
  write(dir.path / "sim.toml", sim_deployment("cost_file = \"known.toml\""));
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const DeploymentConfig deployment = load_deployment(dir.path / "sim.toml", registry);
  VirtualClock clock;
  HostServices host("profile_test", &clock);
  ModelInstance model(deployment.model, dir.path.string(), host);
  EXPECT_EQ(model.info().max_model_len, 8192u);
  EXPECT_EQ(model.info().kv_capacity_tokens, 200000u);

  for (bool quick : {true, false}) {
    const std::vector<ProfileShape> grid =
        profile_grid(quick, model.info().max_model_len, model.info().kv_capacity_tokens, 16);
    ProfileOptions options;
    options.repetitions = 1;
    std::vector<ProfileMeasurement> measured = profile_model(model, grid, options);
    const CostFit fit = fit_cost(measured);
    SCOPED_TRACE(quick ? "quick grid" : "full grid");
    expect_known_coefficients(fit.coefficients, 1e-6);
    EXPECT_LT(fit.max_relative_error, 1e-9);
  }
}

// --engine with --config times that engine's model: a group at tensor_parallel 2 (model_options)
// beside one at 1 reads half the KV per GPU, so its fitted cost per KV position halves; an engine
// that is not there is named.
TEST(Profile, AnEnginesOwnModelOptionsAreProfiledWithEngine) {
  TempDir dir;
  write(dir.path / "pd.toml",
        "[model]\nplugin = \"sim\"\noptions = { gpu = \"h100\", model = \"llama-3.1-8b\" }\n"
        "[[engines]]\n[[engines]]\nmodel_options = { tensor_parallel = 2 }\n");
  const auto per_kv_token = [&](const std::string& engine) {
    const fs::path out = dir.path / ("cost" + engine + ".toml");
    const CliRun r = run("profile --quick --config " + (dir.path / "pd.toml").string() +
                             " --engine " + engine + " --out " + out.string(),
                         dir.path);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return toml::parse_file(out.string())["coefficients"]["per_kv_token_s"].value_or(0.0);
  };
  const double one_gpu = per_kv_token("0");
  const double two_gpus = per_kv_token("1");
  EXPECT_GT(one_gpu, 0.0);
  EXPECT_LT(two_gpus, 0.6 * one_gpu);
  const CliRun r = run("profile --quick --config " + (dir.path / "pd.toml").string() +
                           " --engine 2 --out " + (dir.path / "x.toml").string(),
                       dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--engine 2: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("has 2 engines (engine0 to engine1)"), std::string::npos) << r.err;
}

// A cost file profiled from a simulated model names no machine: its step times are the model's own
// arithmetic, and it used to carry the CPU of the laptop that ran the profile.
TEST(Profile, ACostFileOfASimulatedModelNamesNoMachine) {
  TempDir dir;
  write(dir.path / "known.toml", kKnownCost);
  write(dir.path / "sim.toml", sim_deployment("cost_file = \"known.toml\""));
  const fs::path refit = dir.path / "refit.toml";
  const CliRun r = run(
      "profile --quick --config " + (dir.path / "sim.toml").string() + " --out " + refit.string(),
      dir.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const toml::table file = toml::parse_file(refit.string());
  EXPECT_FALSE(file.contains("machine"));
  std::ifstream in(refit);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("a simulated model reports"), std::string::npos) << text;
}

// The same from a step trace: a simulated run of that model, traced, then `profile
// --from-step-trace`. The trace gives durations to the nanosecond, so the fit is exact to about
// 1e-6 of a 2 ms step; the model's shape and limits come from the trace's model line.
// Writes known.toml and sim.toml (a sim model reading it) into `dir` and traces a simulated run of
// that deployment into steps.jsonl, which it returns.
fs::path trace_known_model(const fs::path& dir) {
  write(dir / "known.toml", kKnownCost);
  write(dir / "sim.toml", sim_deployment("cost_file = \"known.toml\""));
  const fs::path trace = dir / "steps.jsonl";
  CliRun r = run("simulate --no-baseline --quiet --config " + (dir / "sim.toml").string() +
                     " --workload " + (kData / "profile_small.toml").string() + " --step-trace " +
                     trace.string(),
                 dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return trace;
}

TEST(Profile, FitFromAStepTraceRecoversKnownCoefficients) {
  TempDir dir;
  const fs::path trace = trace_known_model(dir.path);
  const fs::path refit = dir.path / "refit.toml";
  CliRun r =
      run("profile --from-step-trace " + trace.string() + " --out " + refit.string(), dir.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("of engine 0 (sim)"), std::string::npos) << r.out;

  const toml::table file = toml::parse_file(refit.string());
  CostCoefficients c;
  c.overhead_s = *file["coefficients"]["overhead_s"].value<double>();
  c.per_token_s = *file["coefficients"]["per_token_s"].value<double>();
  c.per_sampled_token_s = *file["coefficients"]["per_sampled_token_s"].value<double>();
  c.per_attention_pair_s = *file["coefficients"]["per_attention_pair_s"].value<double>();
  c.per_kv_token_s = *file["coefficients"]["per_kv_token_s"].value<double>();
  expect_known_coefficients(c, 1e-4);
  EXPECT_LT(*file["fit"]["max_relative_error"].value<double>(), 1e-5);
  EXPECT_EQ(file["fit"]["method"].value<std::string>(), "step trace");
  EXPECT_EQ(file["source"].value<std::string>(), trace.string());
  EXPECT_FALSE(file.contains("machine"));  // where the trace was recorded is not known here
  const toml::table known = toml::parse(kKnownCost);
  for (const char* key : {"layers", "hidden", "heads", "kv_heads", "head_dim", "vocab",
                          "max_model_len", "kv_capacity_tokens", "kv_bytes_per_token"}) {
    EXPECT_EQ(file["model"][key].value<int64_t>(), known["model"][key].value<int64_t>()) << key;
  }
}

// --check replays the traced steps on a deployment's simulated model: on the model that ran them
// every step is predicted exactly; on one whose coefficients are all doubled, every step takes
// twice as long.
// One row of `profile --check`'s table: steps, p10, p50, p90, median |error|, traced and
// predicted seconds, summed error (percentages as numbers).
struct CheckRow {
  bool found = false;
  size_t steps = 0;
  double p10 = 0, p50 = 0, p90 = 0, magnitude = 0, traced = 0, predicted = 0, sum = 0;
};

CheckRow check_row(const std::string& out, const std::string& name) {
  CheckRow row;
  const size_t at = out.find("\n" + name + " ");
  if (at == std::string::npos) return row;
  const size_t from = at + 1 + name.size();
  std::istringstream in(out.substr(from, out.find('\n', from) - from));
  std::string p10, p50, p90, magnitude, traced, predicted, sum;
  in >> row.steps >> p10 >> p50 >> p90 >> magnitude >> traced >> predicted >> sum;
  if (in.fail()) return row;
  row.found = true;
  row.p10 = std::stod(p10);
  row.p50 = std::stod(p50);
  row.p90 = std::stod(p90);
  row.magnitude = std::stod(magnitude);
  row.traced = std::stod(traced);
  row.predicted = std::stod(predicted);
  row.sum = std::stod(sum);
  return row;
}

// Writes a copy of the known cost file with `edits` ("key = old" -> "key = new") to `file`.
void write_edited_cost(const fs::path& file,
                       std::initializer_list<std::pair<const char*, const char*>> edits) {
  std::string text = kKnownCost;
  for (const auto& [from, to] : edits) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, std::string(from).size(), to);
  }
  write(file, text);
}

// --check replays the traced steps on a deployment's simulated model: on the model that ran them
// every step is predicted exactly; on one whose coefficients are all doubled, every step takes
// twice as long; with only the per-step overhead doubled, short (decode) steps are off by more
// than long ones. Twins that differ from the trace are named in notes.
TEST(Profile, CheckReplaysTheTracedStepsOnATwin) {
  TempDir dir;
  const fs::path trace = trace_known_model(dir.path);
  const auto check = [&](const std::string& twin) {
    CliRun r = run("profile --from-step-trace " + trace.string() + " --check " + twin, dir.path);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  std::string out = check((dir.path / "sim.toml").string());
  const CheckRow all = check_row(out, "all");
  const CheckRow decodes = check_row(out, "decode only");
  const CheckRow prefills = check_row(out, "with a prefill");
  ASSERT_TRUE(all.found && decodes.found && prefills.found) << out;
  EXPECT_GT(decodes.steps, 20u) << out;
  EXPECT_GT(prefills.steps, 5u) << out;
  EXPECT_EQ(decodes.steps + prefills.steps, all.steps) << out;
  // Printed to 0.1%: "+0.0%" or "-0.0%" (the trace's durations are rounded to the nanosecond).
  for (double error : {all.p10, all.p50, all.p90, all.magnitude, all.sum}) {
    EXPECT_EQ(error, 0.0) << out;
  }
  EXPECT_EQ(all.traced, all.predicted) << out;
  EXPECT_EQ(out.find("note:"), std::string::npos) << out;
  // The split is the fit's: its "steps with a prefill" are the same steps.
  CliRun fit = run(
      "profile --from-step-trace " + trace.string() + " --out " + (dir.path / "fit.toml").string(),
      dir.path);
  EXPECT_NE(fit.out.find(std::to_string(prefills.steps) + " of " + std::to_string(all.steps) +
                         " steps with a prefill"),
            std::string::npos)
      << fit.out;

  write_edited_cost(dir.path / "doubled.toml",
                    {{"overhead_s = 2e-3", "overhead_s = 4e-3"},
                     {"per_token_s = 5e-5", "per_token_s = 1e-4"},
                     {"per_sampled_token_s = 1e-4", "per_sampled_token_s = 2e-4"},
                     {"per_attention_pair_s = 2e-9", "per_attention_pair_s = 4e-9"},
                     {"per_kv_token_s = 3e-7", "per_kv_token_s = 6e-7"}});
  write(dir.path / "twin.toml", sim_deployment("cost_file = \"doubled.toml\""));
  out = check((dir.path / "twin.toml").string());
  const CheckRow twice = check_row(out, "all");
  ASSERT_TRUE(twice.found) << out;
  for (double error : {twice.p10, twice.p50, twice.p90, twice.sum}) EXPECT_EQ(error, 100.0) << out;

  write_edited_cost(dir.path / "overhead.toml", {{"overhead_s = 2e-3", "overhead_s = 4e-3"}});
  write(dir.path / "twin.toml", sim_deployment("cost_file = \"overhead.toml\""));
  out = check((dir.path / "twin.toml").string());
  const CheckRow longer = check_row(out, "all");
  ASSERT_TRUE(longer.found) << out;
  EXPECT_GT(longer.p10, 0.0) << out;
  EXPECT_LT(longer.p10, longer.p50) << out;
  EXPECT_LT(longer.p50, longer.p90) << out;
  EXPECT_GT(check_row(out, "decode only").p50, check_row(out, "with a prefill").p50) << out;

  // Another model's presets (Llama-3.1-8B) and a shorter max_model_len are named, not hidden.
  write(dir.path / "twin.toml", sim_deployment("gpu = \"h100\", model = \"llama-3.1-8b\""));
  out = check((dir.path / "twin.toml").string());
  EXPECT_NE(out.find("note: the twin's model (32 layers"), std::string::npos) << out;
  write(dir.path / "twin.toml",
        "[model]\nplugin = \"sim\"\noptions = { cost_file = \"known.toml\" }\n[[engines]]\n"
        "max_model_len = 256\nscheduler = \"chunked\"\n");
  out = check((dir.path / "twin.toml").string());
  EXPECT_NE(out.find("past the twin's max_model_len 256"), std::string::npos) << out;

  CliRun r;
  // A real model's steps are timed, not predicted; --check needs a trace; --out does not go with
  // it.
  r = run_cpu_model("profile --from-step-trace " + trace.string() + " --check " +
                    tiny_cpu_deployment(dir.path, "\"chunked\"").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cpu.toml: model 'cpu' runs for real"), std::string::npos) << r.err;
  r = run("profile --check " + (dir.path / "sim.toml").string(), dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--from-step-trace"), std::string::npos) << r.err;
  r = run("profile --from-step-trace " + trace.string() + " --check " +
              (dir.path / "sim.toml").string() + " --out " + (dir.path / "c.toml").string(),
          dir.path);
  EXPECT_NE(r.exit_code, 0);
  r = run("profile --from-step-trace " + trace.string(), dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--out is required"), std::string::npos) << r.err;
  // A twin that is not there is named before the trace is read (a real one can be hundreds of MB).
  r = run("profile --from-step-trace " + trace.string() + " --check no_such_twin.toml", dir.path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--check"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no_such_twin.toml"), std::string::npos) << r.err;
}

// A wall-clock run of the tiny CPU model, traced, fitted, and simulated with the fit: the path an
// operator takes from a served deployment to its simulated twin. No bound on the fit's error here
// (the machine is shared); the trace-fit's accuracy is measured in docs/profiling.md.
TEST(Profile, WallClockTraceToFittedSimulation) {
  TempDir dir;
  tiny_cpu_deployment(dir.path,
                      "{ plugin = \"chunked\", options = { max_num_batched_tokens = 256 } }");
  const fs::path trace = dir.path / "steps.jsonl";
  CliRun r = run_cpu_model(
      "simulate --no-baseline --quiet --config " + (dir.path / "cpu.toml").string() +
      " --workload " + (kData / "profile_small.toml").string() + " --step-trace " + trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run(
      "profile --from-step-trace " + trace.string() + " --out " + (dir.path / "cost.toml").string(),
      dir.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("covered: batches up to "), std::string::npos) << r.out;
  // Every step the engine traced is fitted but its first (warm-up) and any that only preempted.
  int64_t traced_steps = 0;
  std::ifstream lines(trace);
  for (std::string line; std::getline(lines, line);) {
    const bool ran = line.find("\"step\":") != std::string::npos &&
                     line.find("\"slices\":[]") == std::string::npos;
    traced_steps += ran ? 1 : 0;
  }
  const toml::table file = toml::parse_file((dir.path / "cost.toml").string());
  EXPECT_EQ(file["fit"]["shapes"].value<int64_t>(), traced_steps - 1);
  EXPECT_GT(*file["coefficients"]["per_token_s"].value<double>(), 0.0);
  EXPECT_EQ(file["model_plugin"].value<std::string>(), "cpu");
  EXPECT_EQ(file["model"]["layers"].value<int64_t>(), 2);
  EXPECT_EQ(file["model"]["vocab"].value<int64_t>(), 320);
  EXPECT_GT(traced_steps, 20);

  expect_simulation_finishes(dir.path, "cost_file = \"cost.toml\"");
}

// --max-context: the full grid reaches deeper contexts only when asked, and never past
// max_model_len or the KV capacity.
TEST(Profile, DeepContextsOnlyWhenAsked) {
  const auto deepest = [](const std::vector<ProfileShape>& grid) {
    uint64_t end = 0;
    for (const ProfileShape& shape : grid) {
      for (const ProfileSlice& s : shape.slices) end = std::max<uint64_t>(end, s.start + s.tokens);
    }
    return end;
  };
  const std::vector<ProfileShape> shallow = profile_grid(false, 32768, 1'000'000, 16);
  EXPECT_LE(deepest(shallow), 4096u + 1024u);
  const std::vector<ProfileShape> deep = profile_grid(false, 32768, 1'000'000, 16, 32768);
  EXPECT_EQ(deep.size(), shallow.size() + 14);  // 4 chunks + 3 decode batches at 8k and 16k
  EXPECT_EQ(deepest(deep), 16384u + 2048u);
  // A model that holds only 20,000 tokens of KV and 18,000 positions keeps what fits.
  const std::vector<ProfileShape> bounded = profile_grid(false, 18000, 20000, 16, 32768);
  EXPECT_LE(deepest(bounded), 18000u);
  for (const ProfileShape& shape : bounded) {
    uint64_t tokens = 0;
    for (const ProfileSlice& s : shape.slices) tokens += s.start + s.tokens;
    EXPECT_LE(tokens, 20000u + 16u * shape.slices.size()) << shape.label;
  }
  EXPECT_GT(bounded.size(), shallow.size());  // the 8k shapes that fit are there
  // --quick stays small whatever is asked.
  EXPECT_EQ(profile_grid(true, 32768, 1'000'000, 16, 32768).size(),
            profile_grid(true, 32768, 1'000'000, 16).size());
}

// A term the data does not support is clamped at zero rather than going negative.
TEST(Profile, FitIsNonNegative) {
  std::vector<ProfileMeasurement> measured;
  for (uint32_t tokens : {1u, 2u, 4u, 8u, 16u, 32u, 64u}) {
    ProfileMeasurement& m = measured.emplace_back();
    m.shape.slices = {{0, tokens, true}};
    m.features = StepFeatures::of(m.shape.slices);
    // Time falls slightly with the attention pairs once the tokens are accounted for: the
    // unconstrained fit would give that term a negative coefficient.
    m.median_s = 1e-3 + 1e-4 * tokens - 1e-8 * m.features.attention_pairs;
  }
  const CostFit fit = fit_cost(measured);
  const CostCoefficients& c = fit.coefficients;
  for (double v : {c.overhead_s, c.per_token_s, c.per_sampled_token_s, c.per_attention_pair_s,
                   c.per_kv_token_s}) {
    EXPECT_GE(v, 0.0);
  }
  EXPECT_LT(fit.median_relative_error, 0.05);
}

}  // namespace
}  // namespace headway::core
