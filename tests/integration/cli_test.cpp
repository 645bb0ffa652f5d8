// Runs the `headway` binary as a user would: successful runs produce a report; every bad
// invocation exits non-zero with one clear line on stderr.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(HEADWAY_SOURCE_DIR) / "tests/integration/data";

using headway::test::CliRun;
CliRun run(const std::string& args) { return headway::test::run_cli(args); }

size_t lines(const std::string& s) {
  size_t count = 0;
  for (char c : s) count += c == '\n';
  return count;
}

TEST(Cli, SimulatePrintsAReportAndWritesJson) {
  fs::path out = fs::temp_directory_path() / "headway_cli_report.json";
  fs::path steps = fs::temp_directory_path() / "headway_cli_steps.jsonl";
  CliRun r = run("simulate --config " + (kData / "two_engines.toml").string() + " --workload " +
                 (kData / "small_mixed.toml").string() + " --out " + out.string() +
                 " --step-trace " + steps.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("TTFT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("document"), std::string::npos) << r.out;
  // Its size is said (a long run's step trace is hundreds of MB), on stderr: stdout is the report.
  EXPECT_NE(r.err.find("step trace written to " + steps.string() + " ("), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("written to"), std::string::npos) << r.out;
  std::ifstream in(out);
  nlohmann::json report = nlohmann::json::parse(in);
  EXPECT_EQ(report["deployment"], "two-engines");
  EXPECT_TRUE(report.contains("hol_factor"));
  // Every plugin that ran, with its file: model, router and both engines' schedulers.
  std::map<std::string, std::string> plugins;
  for (const auto& p : report["plugins"]) {
    plugins[p["role"].get<std::string>()] = p["name"].get<std::string>();
    EXPECT_TRUE(fs::exists(p["file"].get<std::string>())) << p.dump();
    EXPECT_FALSE(p["version"].get<std::string>().empty()) << p.dump();
  }
  EXPECT_EQ(plugins["model"], "org.headway.model.sim");
  EXPECT_EQ(plugins["router"], "org.headway.router.least_loaded");
  EXPECT_EQ(plugins["engine0.scheduler"], "org.headway.scheduler.chunked");
  EXPECT_EQ(plugins["engine1.scheduler"], "org.headway.scheduler.chunked");

  std::ifstream trace(steps);
  std::string line;
  size_t count = 0;
  std::vector<int> described;  // engines whose model line came, in order
  while (std::getline(trace, line)) {
    nlohmann::json step = nlohmann::json::parse(line);
    if (step.contains("model")) {
      // Each engine's model line comes before its steps: the sim model's 8B shape here.
      EXPECT_EQ(count, 0u) << "a model line after the steps began";
      EXPECT_EQ(step["model"]["plugin"], "sim");
      EXPECT_EQ(step["model"]["layers"], 32);
      EXPECT_GT(step["model"]["kv_capacity_tokens"].get<uint64_t>(), 0u);
      described.push_back(step["engine"].get<int>());
      continue;
    }
    ASSERT_TRUE(step.contains("slices"));
    ASSERT_TRUE(step.contains("duration"));
    for (const auto& slice : step["slices"]) {
      EXPECT_TRUE(slice["kind"] == "prefill" || slice["kind"] == "decode");
      // A decode always samples; a prefill chunk does when it ends its prompt.
      ASSERT_TRUE(slice["sample"].is_boolean());
      if (slice["kind"] == "decode") EXPECT_TRUE(slice["sample"].get<bool>());
    }
    ++count;
  }
  EXPECT_GT(count, 10u);
  EXPECT_EQ(described, (std::vector<int>{0, 1}));
  fs::remove(out);
  fs::remove(steps);
}

// --num-requests and --duration pick the same prefix of the workload as `headway bench` sends,
// so a measurement and its prediction cover the same requests.
TEST(Cli, SimulateTakesThePrefixBenchSends) {
  const fs::path out = fs::temp_directory_path() / "headway_cli_prefix.json";
  CliRun r = run("simulate --config " + (kData / "two_engines.toml").string() + " --workload " +
                 (kData / "small_mixed.toml").string() + " --num-requests 5 --quiet --out " +
                 out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out);
  const nlohmann::json report = nlohmann::json::parse(in);
  size_t requests = 0;
  for (const auto& c : report["classes"]) requests += c["requests"].get<size_t>();
  EXPECT_EQ(requests, 5u);
  fs::remove(out);

  CliRun early =
      run("simulate --workload " + (kData / "small_mixed.toml").string() + " --duration 0.0001");
  EXPECT_NE(early.exit_code, 0);
  EXPECT_NE(early.err.find("--duration 0.0001: no request"), std::string::npos) << early.err;
}

TEST(Cli, BuiltInDefaultRunsWithNoArguments) {
  CliRun r = run("simulate");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("HOL factor"), std::string::npos) << r.out;
}

// --log-level belongs to the app, and is taken after a subcommand too.
TEST(Cli, LogLevelIsTakenBeforeOrAfterTheSubcommand) {
  for (const char* args : {"--log-level info simulate", "simulate --log-level info"}) {
    CliRun r = run(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("info: "), std::string::npos) << args << "\n" << r.err;
  }
  CliRun both = run("--log-level info simulate --log-level warn");  // the last one wins
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(both.err.find("info: "), std::string::npos) << both.err;
  CliRun bad = run("simulate --log-level loud");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--log-level"), std::string::npos) << bad.err;
}

// A command line the parser refuses exits 2 (a usage error) and names the flag and the reason:
// values that used to pass unnoticed (a negative port binding the default, a 0 dimension turned
// into the default) included.
TEST(Cli, RefusedFlagsExitTwoNamingTheFlag) {
  const fs::path out = fs::temp_directory_path() / ("headway_cli_tiny_" + std::to_string(getpid()));
  const struct {
    std::string args;
    std::string says;
  } cases[] = {
      {"serve --config " + (kData / "two_engines.toml").string() + " --port -1",
       "--port: Value -1 not in range 0 to 65535"},
      {"serve --config " + (kData / "two_engines.toml").string() + " --grpc-port 70000",
       "--grpc-port: Value 70000 not in range 0 to 65535"},
      {"model make-tiny --out " + out.string() + " --layers 0",
       "--layers: must be greater than 0, got 0"},
      {"simulate --num-requests 0", "--num-requests: must be greater than 0, got 0"},
      {"plan --model llama-3.1-8b --gpu a100 --context 100", "--gpu: a100 not in {h100,h200}"},
  };
  for (const auto& c : cases) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(out)) << "nothing written for a refused command";
}

// Files written at the end of a run are checked before it: a typo must not cost the simulation.
TEST(Cli, OutputPathsAreCheckedBeforeTheRun) {
  const struct {
    std::string args;
    std::string says;
  } cases[] = {
      {"simulate --out /nonexistent/x.json",
       "--out /nonexistent/x.json: the directory "
       "/nonexistent does not exist"},
      {"simulate --step-trace " + fs::temp_directory_path().string(), "is a directory"},
      {"profile --config " + (kData / "two_engines.toml").string() + " --out /nonexistent/c.toml",
       "--out /nonexistent/c.toml: the directory /nonexistent does not exist"},
      // An output that would overwrite an input, or another output.
      {"simulate --workload " + (kData / "small_mixed.toml").string() + " --out " +
           (kData / "small_mixed.toml").string(),
       "small_mixed.toml: is also --workload; give --out a file of its own"},
      {"simulate --config " + (kData / "two_engines.toml").string() + " --step-trace " +
           (kData / "two_engines.toml").string(),
       "two_engines.toml: is also --config; give --step-trace a file of its own"},
      {"simulate --out /tmp/headway_cli_same.json --step-trace /tmp/headway_cli_same.json",
       "is also --step-trace"},
      {"profile --config " + (kData / "two_engines.toml").string() + " --out " +
           (kData / "two_engines.toml").string(),
       "is also --config"},
  };
  for (const auto& c : cases) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << "nothing ran: " << c.args;
  }
}

// A deployment that refuses every request of the workload (here: prompts longer than its
// max_model_len) fails the command instead of reporting an empty run with exit code 0; the report
// is still written.
TEST(Cli, ADeploymentThatServesNothingFailsTheCommand) {
  const fs::path config = fs::temp_directory_path() / "headway_cli_serves_nothing.toml";
  const fs::path out = fs::temp_directory_path() / "headway_cli_serves_nothing.json";
  std::ofstream(config) << "name = \"tiny-context\"\n[model]\nplugin = \"sim\"\n"
                           "options = { gpu = \"h100\", model = \"llama-3.1-8b\" }\n"
                           "[[engines]]\nmax_model_len = 16\nscheduler = \"chunked\"\n";
  CliRun r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
                 (kData / "small_mixed.toml").string() + " --out " + out.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("deployment 'tiny-context' refused every one of the 200 requests"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(out));
  fs::remove(config);
  fs::remove(out);
}

// A plugin that calls exit(0) mid-run used to end `headway simulate` with status 0 and no output: a
// run that looked successful. The host says what happened, naming the plugin call, and fails.
TEST(Cli, APluginThatCallsExitFailsTheCommand) {
  const fs::path config = fs::temp_directory_path() / "headway_cli_exiting_plugin.toml";
  std::ofstream(config) << "name = \"exiting\"\n[model]\nplugin = \"sim\"\n"
                           "[[engines]]\nscheduler = \""
                        << HEADWAY_TEST_PLUGIN_DIR << "/test_exiting_scheduler.so\"\n";
  CliRun r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
                 (kData / "small_mixed.toml").string());
  EXPECT_EQ(r.exit_code, 70) << r.err;
  EXPECT_NE(r.err.find("exit() was called during scheduler 'test_exiting' schedule() "
                       "(the plugin, or a library it uses, ended the process)"),
            std::string::npos)
      << r.err;
  fs::remove(config);
}

// A model that writes one sampled id past the batch's slices (a terminator, as C code might) hits
// the engine's guard entry: the run fails naming the model, where the write used to land in the
// engine's heap (a heap overflow under ASan, silent corruption in a release build).
TEST(Cli, AModelWritingPastItsSampledIdsFailsTheRun) {
  const fs::path config = fs::temp_directory_path() / "headway_cli_terminated_ids.toml";
  std::ofstream(config) << "name = \"terminated\"\n[model]\nplugin = \""
                        << HEADWAY_FAULTY_PLUGIN_DIR
                        << "/faulty_terminated_ids_model.so\"\n"
                           "[[engines]]\nscheduler = \"chunked\"\n";
  CliRun r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
                 (kData / "small_mixed.toml").string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(": step 0: model 'faulty_terminated_ids' forward() wrote "
                       "hw_model_output.sampled["),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("], past the batch's slices (one id per slice, abi.h)"), std::string::npos)
      << r.err;
  fs::remove(config);
}

// A plugin whose code ends the process with std::terminate (here a std::thread it never joined,
// destroyed at destroy()) printed only "terminate called without an active exception": the host's
// handler names the plugin call that was running.
TEST(Cli, AProcessEndedInAPluginCallNamesTheCall) {
  CliRun r = run("plugin validate " + std::string(HEADWAY_TEST_PLUGIN_DIR) +
                 "/test_unjoined_thread_scheduler.so");
  EXPECT_EQ(r.exit_code, 128 + SIGABRT) << r.err;
  EXPECT_NE(r.err.find("headway: terminated during scheduler 'test_unjoined_thread' destroy() (the "
                       "plugin's code ended the process)"),
            std::string::npos)
      << r.err;
}

// A plugin that dies of SIGSEGV in schedule(): the process still dies of it (by the signal, or
// through AddressSanitizer's report in a sanitizer build), but first says which plugin call
// crashed; it used to end with nothing on stderr.
TEST(Cli, ACrashInAPluginCallNamesTheCall) {
  const fs::path config = fs::temp_directory_path() / "headway_cli_crashing.toml";
  std::ofstream(config) << "name = \"crashing\"\n[model]\nplugin = \"sim\"\n"
                           "[[engines]]\nscheduler = \""
                        << HEADWAY_TEST_PLUGIN_DIR << "/test_signalling_scheduler.so\"\n";
  CliRun r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
                 (kData / "small_mixed.toml").string());
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("headway: SIGSEGV during scheduler 'test_signalling' schedule() (the "
                       "plugin's code crashed the process)"),
            std::string::npos)
      << r.err;
  fs::remove(config);
}

// A GPU figure that is positive but absurdly small is refused by name; it used to pass and print
// TTFTs with 300 digits.
TEST(Cli, AnAbsurdlySmallGpuFigureIsRefused) {
  const fs::path config = fs::temp_directory_path() / "headway_cli_tiny_gpu.toml";
  std::ofstream(config) << "name = \"tiny-gpu\"\n[model]\nplugin = \"sim\"\n"
                           "options = { gpu = \"h100\", peak_tflops = 1e-300 }\n"
                           "[[engines]]\nscheduler = \"chunked\"\n";
  CliRun r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
                 (kData / "small_mixed.toml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("peak_tflops = 1e-300 is below 0.001"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("=="), std::string::npos) << r.out;
  fs::remove(config);
}

// "-" is not standard output for --out (the report text goes there), and an --slo given empty is
// not the default SLO: both are refused before anything runs.
TEST(Cli, OutDashAndAnEmptySloAreRefused) {
  CliRun r = run("simulate --quiet --no-baseline --out - --workload " +
                 (kData / "small_mixed.toml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--out -: writes a file, not standard output"), std::string::npos) << r.err;
  r = run("simulate --quiet --no-baseline --slo '' --workload " +
          (kData / "small_mixed.toml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--slo: empty"), std::string::npos) << r.err;
}

// --rate-scale F divides every arrival by F: twice the rate sends the same requests in about half
// the simulated time (the last arrival moves to half its time), and the report says so.
TEST(Cli, RateScaleSpeedsTheArrivalsUp) {
  const fs::path dir = fs::temp_directory_path() / "headway_cli_rate_scale";
  fs::create_directories(dir);
  const auto simulated = [&](const std::string& extra, const fs::path& out) {
    const CliRun r =
        run("simulate --quiet --no-baseline --num-requests 40 --workload " +
            (kData / "small_mixed.toml").string() + " --out " + out.string() + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(out);
    return nlohmann::json::parse(in);
  };
  const nlohmann::json plain = simulated("", dir / "plain.json");
  const nlohmann::json fast = simulated("--rate-scale 2", dir / "fast.json");
  EXPECT_EQ(plain["rate_scale"], 1.0);
  EXPECT_EQ(fast["rate_scale"], 2.0);
  EXPECT_EQ(fast["overall"]["requests"], plain["overall"]["requests"]);
  EXPECT_NEAR(fast["overall"]["requests_per_s"].get<double>(),
              2 * plain["overall"]["requests_per_s"].get<double>(),
              0.5 * plain["overall"]["requests_per_s"].get<double>());
  EXPECT_LT(fast["simulated_seconds"].get<double>(), plain["simulated_seconds"].get<double>());
  // The factor is the double its text names (strtod's): a capacity search's printed factor given
  // back replays that probe. CLI11's own reading rounds twice and made this one a double more.
  const nlohmann::json exact = simulated("--rate-scale 0.002877", dir / "exact.json");
  EXPECT_EQ(exact["rate_scale"].get<double>(), std::strtod("0.002877", nullptr));
  const CliRun bad =
      run("simulate --quiet --rate-scale inf --workload " + (kData / "small_mixed.toml").string());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("must be a finite number"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

// Refusals are warned once per run, each naming the deployment and, for the second run without
// the long classes, that run: two bare "N of M requests were refused" lines read as one run's.
TEST(Cli, RefusalsNameTheRunTheyHappenedIn) {
  const fs::path config = fs::temp_directory_path() / "headway_cli_tight.toml";
  std::ofstream(config) << "name = \"tight\"\n[model]\nplugin = \"sim\"\n"
                           "[[engines]]\nscheduler = \"chunked\"\nmax_waiting = 1\n";
  const CliRun r = run("simulate --quiet --config " + config.string() + " --workload " +
                       (kData / "small_mixed.toml").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tight: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tight (the run without the long classes"), std::string::npos) << r.err;
  fs::remove(config);
}

// An engine group's model_options may change how the model runs, not which model it is: a decode
// engine of another model (8B beside a 70B prefill engine) is refused naming the difference, and
// a TP8 prefill engine beside TP4 decode runs.
TEST(Cli, ModelOptionsMayNotChangeTheModel) {
  const fs::path config = fs::temp_directory_path() / "headway_cli_model_options.toml";
  const auto write = [&](const std::string& decode_options) {
    std::ofstream(config)
        << "name = \"pd\"\n[model]\nplugin = \"sim\"\n"
           "options = { gpu = \"h100\", model = \"llama-3.3-70b\", tensor_parallel = 4 }\n"
           "[[engines]]\nrole = \"prefill\"\nmodel_options = { tensor_parallel = 8 }\n"
           "[[engines]]\nrole = \"decode\"\nmodel_options = { "
        << decode_options
        << " }\n[router]\nplugin = \"disaggregated\"\n[kv_transport]\nplugin = \"host_copy\"\n";
  };
  write("model = \"llama-3.1-8b\"");
  CliRun r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
                 (kData / "small_mixed.toml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("engines[0].model_options (engine0) and " + config.string() +
                       ": engines[1].model_options (engine1) give models of different layers (80 "
                       "and 32)"),
            std::string::npos)
      << r.err;
  write("tensor_parallel = 4");
  r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
          (kData / "small_mixed.toml").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  fs::remove(config);
}

// Tensor parallelism past one 8-GPU node on a GPU preset is refused: the preset's link is NVLink
// inside a node, and pricing 16 GPUs as one node made a 70B decode look 2 ms faster than 8 do.
// A custom GPU, whose link the operator gives, may span nodes.
TEST(Cli, TensorParallelismPastOneNodeNeedsACustomGpu) {
  const fs::path config = fs::temp_directory_path() / "headway_cli_tp16.toml";
  const auto write = [&](const std::string& options) {
    std::ofstream(config) << "name = \"tp16\"\n[model]\nplugin = \"sim\"\noptions = { " << options
                          << " }\n[[engines]]\nscheduler = \"chunked\"\n";
  };
  write("model = \"llama-3.3-70b\", tensor_parallel = 16");
  CliRun r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
                 (kData / "small_mixed.toml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tensor_parallel = 16 spans more than one 8-GPU node"), std::string::npos)
      << r.err;
  write(
      "model = \"llama-3.3-70b\", tensor_parallel = 16, gpu = \"custom\", peak_tflops = 989, "
      "hbm_tb_per_s = 3.35, hbm_gb = 80, link_gb_per_s = 100");
  r = run("simulate --quiet --no-baseline --config " + config.string() + " --workload " +
          (kData / "small_mixed.toml").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  fs::remove(config);
}

// make-tiny refuses a shape whose sizes are each in range but whose weights would not fit in
// memory, before it creates anything (it used to run out of memory with config.json written).
TEST(Cli, MakeTinyRefusesAShapeTooLargeToBuild) {
  const fs::path out = fs::temp_directory_path() / ("headway_cli_huge_" + std::to_string(getpid()));
  CliRun r = run("model make-tiny --out " + out.string() +
                 " --layers 1024 --hidden 65536 --heads 512 --kv-heads 512 --ffn 1000000");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("make-tiny builds test models of at most 1073741824"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// A report that cannot be written fails the command, naming the file and the reason (it used to
// exit 0 with nothing written).
TEST(Cli, AReportThatCannotBeWrittenFailsTheCommand) {
  CliRun r =
      run("simulate --quiet --no-baseline --config " + (kData / "two_engines.toml").string() +
          " --workload " + (kData / "small_mixed.toml").string() + " --out /dev/full");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/dev/full: writing the report failed: No space left on device"),
            std::string::npos)
      << r.err;
}

// `plugin list` says on stderr where it looked; a HEADWAY_PLUGIN_PATH entry that is not a directory
// was skipped without a word.
TEST(Cli, PluginListSaysWhereItLookedAndWhatItSkipped) {
  // The command line goes through the shell: an assignment before the program sets its environment.
  const CliRun r = headway::test::run_program(
      std::string("HEADWAY_PLUGIN_PATH=/nonexistent/headway ") + HEADWAY_CLI, "plugin list");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("chunked"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("searched /nonexistent/headway: not a directory (skipped)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("searched"), std::string::npos) << r.out;
}

// `plugin validate`: the options against the schema, then an instance created with them; every
// refusal is one line naming the key, or the plugin's own message.
TEST(Cli, PluginValidateCreatesAnInstanceWithTheOptions) {
  CliRun ok = run("plugin validate chunked --options 'max_num_seqs = 8'");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("ok: org.headway.scheduler.chunked"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("8 requests running"), std::string::npos) << ok.out;

  const struct {
    std::string args;
    std::string says;
  } refused[] = {
      {"plugin validate chunked --options 'max_num_seqs = 0'",
       "--options.max_num_seqs: expected integer in [1, 65536], got 0"},
      {"plugin validate chunked --options 'nope = 1'", "unknown key 'nope'"},
      {"plugin validate chunked --options 'max_num_seqs ='", "not a TOML inline-table body"},
      {"plugin validate cpu", "option 'path' (the checkpoint directory) is required"},
  };
  for (const auto& c : refused) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
  }
}

TEST(Cli, MissingConfigFileIsOneClearLine) {
  CliRun r = run("simulate --config /nonexistent/deploy.toml");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/deploy.toml"), std::string::npos) << r.err;
}

TEST(Cli, UnknownPluginIsOneClearLine) {
  CliRun r = run("simulate --config " + (kData / "unknown_plugin.toml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("no_such_scheduler"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("engines[0].scheduler"), std::string::npos) << r.err;
}

TEST(Cli, BadWorkloadIsOneClearLine) {
  CliRun r = run("simulate --config " + (kData / "two_engines.toml").string() + " --workload " +
                 (kData / "bad_workload.toml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("gauss"), std::string::npos) << r.err;
}

TEST(Cli, UnknownSubcommandFails) {
  CliRun r = run("simulat");
  EXPECT_NE(r.exit_code, 0);
}

TEST(Cli, PluginDescribePrintsDescriptorAndTemplate) {
  CliRun r = run("plugin describe chunked");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("org.headway.scheduler.chunked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[engines.scheduler.options]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max_num_batched_tokens = 8192"), std::string::npos) << r.out;
}

TEST(Cli, PluginDescribeOfAMissingFileFails) {
  CliRun r = run("plugin describe /nonexistent/libx.so");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
}

}  // namespace
