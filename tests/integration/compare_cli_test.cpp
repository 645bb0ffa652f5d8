// `headway simulate` comparing deployments, as a user runs it: several --config give one
// comparison table and a JSON document with every deployment; --slo errors name the bad term;
// --plot draws a PNG when gnuplot is installed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(HEADWAY_SOURCE_DIR) / "tests/integration/data";

using headway::test::CliRun;
CliRun run(const std::string& args) { return headway::test::run_cli(args); }

std::string two_deployments() {
  return "simulate --config " + (kData / "two_engines.toml").string() + " --config " +
         (kData / "one_engine_rdns.toml").string() + " --workload " +
         (kData / "small_mixed.toml").string();
}

TEST(CompareCli, TwoConfigsPrintOneTableAndWriteBoth) {
  const fs::path out = fs::temp_directory_path() / "headway_compare_report.json";
  fs::remove(out);
  const CliRun r = run(two_deployments() + " --slo ttft=2s,tpot=100ms --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part : {"comparison over", "short TTFT", "long TTFT", "HOL", "goodput",
                           "two-engines", "vs two-engines", "ttft=2s,tpot=100ms"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << "missing \"" << part << "\" in\n" << r.out;
  }
  // Several deployments: one summary line each, not the full per-class tables.
  EXPECT_EQ(r.out.find("queue "), std::string::npos) << r.out;

  std::ifstream in(out);
  ASSERT_TRUE(in) << out;
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["deployments"].size(), 2u);
  EXPECT_EQ(doc["deployments"][0]["deployment"], "two-engines");
  EXPECT_EQ(doc["slo"], "ttft=2s,tpot=100ms");
  EXPECT_TRUE(doc["deployments"][1]["goodput"]["requests_per_s"].is_number());
  ASSERT_EQ(doc["comparison"]["rows"].size(), 2u);
  EXPECT_EQ(doc["comparison"]["baseline"], "two-engines");
  EXPECT_EQ(doc["comparison"]["rows"][1]["deployment"], doc["deployments"][1]["deployment"]);
  EXPECT_TRUE(doc["comparison"]["rows"][1]["vs_baseline"]["throughput_change"].is_number());
  fs::remove(out);
}

TEST(CompareCli, BadSloTermIsNamedBeforeAnythingRuns) {
  const CliRun r = run(two_deployments() + " --slo ttft=2s,tpot=100");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'tpot=100'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("comparison"), std::string::npos) << r.out;
}

TEST(CompareCli, FindCapacityReportsARate) {
  const fs::path out = fs::temp_directory_path() / "headway_capacity_report.json";
  const CliRun r = run("simulate --config " + (kData / "one_engine_rdns.toml").string() +
                       " --workload " + (kData / "small_mixed.toml").string() +
                       " --quiet --no-baseline --find-capacity --capacity-limit 40 --slo "
                       "ttft=1s,tpot=100ms --out " +
                       out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("capacity within ttft=1s,tpot=100ms"), std::string::npos) << r.out;
  std::ifstream in(out);
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["capacity"]["requests"], 40);
  EXPECT_GT(doc["capacity"]["probes"].size(), 1u);
  fs::remove(out);
}

// An SLO no rate meets (1 ms TTFT): the table shows the figures of the lowest failing probe, not
// dashes, and a line says that single requests miss it and how to judge the short classes alone.
TEST(CompareCli, FindCapacityExplainsAnSloThatNoRateMeets) {
  const CliRun r = run("simulate --config " + (kData / "one_engine_rdns.toml").string() +
                       " --workload " + (kData / "small_mixed.toml").string() +
                       " --quiet --no-baseline --find-capacity --capacity-limit 20 --slo "
                       "ttft=1ms,tpot=100ms");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("none"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the SLO fails even at"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--capacity-scope short"), std::string::npos) << r.out;
  const size_t row = r.out.find("\none_engine_rdns ");
  ASSERT_NE(row, std::string::npos) << r.out;
  const std::string line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  EXPECT_EQ(line.find(" - "), std::string::npos) << line;
}

// The capacity options only shape --find-capacity: alone they would be silently ignored.
TEST(CompareCli, CapacityOptionsWithoutFindCapacityAreRefused) {
  for (const std::string option : {"--capacity-limit 40", "--capacity-scope short"}) {
    const CliRun r = run(two_deployments() + " --quiet " + option);
    EXPECT_NE(r.exit_code, 0) << option;
    EXPECT_NE(r.err.find("requires --find-capacity"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("=="), std::string::npos) << r.out;  // nothing ran
  }
}

// `--seeds 3` runs both deployments on three draws of the workload (seeds 7, 8, 9: the file says
// 7) and reports the spread; its seed-9 comparison is the one `--seed 9` gives alone.
TEST(CompareCli, SeedsRunEveryDeploymentOnEachDrawOfTheWorkload) {
  const fs::path out = fs::temp_directory_path() / "headway_seed_sweep.json";
  const fs::path one = fs::temp_directory_path() / "headway_seed_9.json";
  const CliRun r = run(two_deployments() + " --seeds 3 --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part : {"seed 7: == two-engines", "seed 9: == one_engine_rdns", "seeds 7-9",
                           "median", "range", "vs two-engines, seed by seed"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << "missing \"" << part << "\" in\n" << r.out;
  }
  std::ifstream in(out);
  ASSERT_TRUE(in) << out;
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["per_seed"].size(), 3u);
  EXPECT_EQ(doc["per_seed"][2]["seed"], 9);
  EXPECT_EQ(doc["per_seed"][2]["rejected"]["two-engines"], 0);
  EXPECT_EQ(doc["sweep"]["seeds"], nlohmann::json::array({7, 8, 9}));
  ASSERT_EQ(doc["sweep"]["rows"].size(), 2u);
  EXPECT_EQ(doc["sweep"]["rows"][0]["short_ttft_p99"]["seeds"], 3);
  EXPECT_TRUE(doc["sweep"]["rows"][1]["vs_baseline"]["goodput"]["better"].is_number());

  const CliRun alone = run(two_deployments() + " --seed 9 --quiet --out " + one.string());
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  std::ifstream in_one(one);
  const nlohmann::json single = nlohmann::json::parse(in_one);
  EXPECT_EQ(single["comparison"]["rows"], doc["per_seed"][2]["comparison"]["rows"]);
  EXPECT_NE(single["comparison"]["rows"], doc["per_seed"][0]["comparison"]["rows"]);
  fs::remove(out);
  fs::remove(one);
}

TEST(CompareCli, SeedSweepsRefuseWhatTheyCannotDo) {
  const fs::path workloads = fs::path(HEADWAY_SOURCE_DIR) / "tests/data/workloads";
  const fs::path trace_replay = workloads / "trace_replay.toml";
  // The trace's rows, then long prompts mixed in at random over its span: the first request is a
  // trace row in every draw.
  const fs::path mixed = fs::temp_directory_path() / "headway_trace_and_long.toml";
  std::ofstream(mixed) << "[trace]\nfile = \"" << (workloads / "small_trace.csv").string()
                       << "\"\n[[classes]]\nname = \"long\"\nshare = 0.5\nlong = true\n"
                          "prompt = { dist = \"fixed\", value = 1000 }\n"
                          "output = { dist = \"fixed\", value = 10 }\n";
  const struct {
    std::string args, message;
  } cases[] = {
      {two_deployments() + " --seeds 2 --find-capacity", "--find-capacity works on one draw"},
      {two_deployments() + " --seeds 1", "not in range 2 to 10000"},
      {two_deployments() + " --seed -1", "expected an integer >= 0, got '-1'"},
      {two_deployments() + " --seed 18446744073709551616", "must be at most 18446744073709551615"},
      // small_mixed.toml draws everything at random, but not so a trace replay, nor (below) the
      // first requests of a workload whose random part comes later.
      {"simulate --workload " + trace_replay.string() + " --seeds 2", "draws nothing at random"},
      {"simulate --workload " + mixed.string() + " --seeds 2 --num-requests 1",
       "the requests --num-requests 1 keeps of " + mixed.string() + " are the same in every draw"},
  };
  for (const auto& c : cases) {
    const CliRun r = run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out.find("=="), std::string::npos) << r.out;  // nothing ran
  }
  fs::remove(mixed);
}

TEST(CompareCli, PlotWritesAPng) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed (Debian package gnuplot-nox)";
  }
  const fs::path png = fs::temp_directory_path() / "headway_compare_plot.png";
  fs::remove(png);
  const CliRun r = run(two_deployments() + " --quiet --plot " + png.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(png)) << r.out;
  EXPECT_GT(fs::file_size(png), 1000u);
  std::ifstream in(png, std::ios::binary);
  std::array<char, 8> magic{};
  in.read(magic.data(), magic.size());
  EXPECT_EQ(std::string(magic.data() + 1, 3), "PNG");
  fs::remove(png);
}

}  // namespace
