// `headway bench` run as a user runs it, against the fake OpenAI server of this directory.
#include <gtest/gtest.h>
#include <headway/core/workload.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../../../integration/cli_runner.h"
#include "fake_openai_server.h"

namespace {

namespace fs = std::filesystem;
using headway::test::CliRun;
using headway::test::FakeBehaviour;
using headway::test::FakeOpenAiServer;

const fs::path kWorkload =
    fs::path(HEADWAY_SOURCE_DIR) / "tests/unit/serving/bench/data/two_classes.toml";
const fs::path kDeployment =
    fs::path(HEADWAY_SOURCE_DIR) / "tests/integration/data/two_engines.toml";

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

class BenchCli : public ::testing::Test {
 protected:
  CliRun bench(const std::string& args) {
    return headway::test::run_cli("bench --url " + server.url() + " --workload " +
                                  kWorkload.string() + " " + args);
  }
  nlohmann::json read_json() {
    std::ifstream in(out);
    return nlohmann::json::parse(in);
  }
  void TearDown() override { fs::remove(out); }

  FakeOpenAiServer server;
  const fs::path out =
      fs::temp_directory_path() / ("headway_bench_cli_" + std::to_string(::getpid()) + ".json");
};

TEST_F(BenchCli, MeasuresTheWorkloadAndWritesTheReport) {
  const CliRun r = bench("--out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("TTFT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured on a server"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("send lateness"), std::string::npos) << r.out;
  // Not a terminal: plain progress lines, the last one with every request finished.
  EXPECT_NE(r.err.find("bench: 24/24 finished (0 failed)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
  EXPECT_EQ(server.received().size(), 24u);

  const nlohmann::json report = read_json();
  ASSERT_EQ(report["classes"].size(), 2u);
  EXPECT_EQ(report["classes"][0]["name"], "chat");
  EXPECT_EQ(report["classes"][1]["name"], "document");
  EXPECT_EQ(report["overall"]["finished"], 24);
  // Engine steps are not seen from a client: unknown, not 0.
  EXPECT_TRUE(report["steps"].is_null()) << report["steps"];
  EXPECT_TRUE(report["preemptions"].is_null());
  EXPECT_EQ(r.out.find(" steps, "), std::string::npos) << r.out;
  EXPECT_EQ(report["bench"]["model"], "tiny");  // from GET /v1/models
  EXPECT_EQ(report["bench"]["overall"]["sent"], 24);
  EXPECT_EQ(report["bench"]["overall"]["failed"], 0);
  EXPECT_FALSE(report.contains("prediction"));
}

// Ctrl-C during a run: the report of what was sent is printed and written (it was lost before),
// marked interrupted, and the exit status is 130. The server holds every stream without a byte, so
// the streams are shut down rather than waited for.
TEST_F(BenchCli, AnInterruptedRunReportsWhatItMeasured) {
  for (const char* c : {"chat", "document"}) server.set_behaviour(c, FakeBehaviour::kHold);
  const fs::path pid_file =
      fs::temp_directory_path() / ("headway_bench_cli_pid_" + std::to_string(::getpid()));
  CliRun r;
  std::thread run([&] {
    r = headway::test::run_program(
        "sh", "-c '" + std::string(HEADWAY_CLI) + " bench --quiet --max-concurrency 4 --url " +
                  server.url() + " --workload " + kWorkload.string() + " --out " + out.string() +
                  " & echo $! > " + pid_file.string() + "; wait $!'");
  });
  ASSERT_TRUE(server.wait_until_held(4));
  pid_t pid = 0;
  std::ifstream(pid_file) >> pid;
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGINT);
  run.join();
  server.release_held();
  fs::remove(pid_file);
  EXPECT_EQ(r.exit_code, 130) << r.err << r.out;
  EXPECT_NE(r.err.find("SIGINT: stopped after sending 4 of 24 requests"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("TTFT"), std::string::npos) << r.out;
  const nlohmann::json report = read_json();
  EXPECT_EQ(report["bench"]["interrupted"], true);
  EXPECT_EQ(report["bench"]["overall"]["sent"], 4);
  EXPECT_EQ(report["bench"]["overall"]["failures"]["interrupted"], 4) << report["bench"].dump(2);
}

TEST_F(BenchCli, FailuresAreCountedPerClassWithoutStoppingTheRun) {
  server.set_behaviour("document", FakeBehaviour::kHttp503);
  const CliRun r = bench("--quiet --num-requests 12 --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // --quiet: no progress lines; the one line on stderr is the warning that some requests failed.
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("headway bench: warning: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" of 12 requests failed"), std::string::npos) << r.err;
  EXPECT_EQ(server.received().size(), 12u);
  EXPECT_NE(r.out.find("http_status"), std::string::npos) << r.out;
  const nlohmann::json report = read_json();
  const nlohmann::json& document = report["bench"]["classes"][1];
  EXPECT_EQ(document["name"], "document");
  EXPECT_GT(document["failures"]["http_status"].get<int>(), 0);
  EXPECT_EQ(document["failures"]["http_status"], document["sent"]);
  EXPECT_EQ(report["bench"]["classes"][0]["failed"], 0);
}

TEST_F(BenchCli, ARunWhereNothingSucceedsExitsNonZeroWithTheFirstFailure) {
  server.set_behaviour("chat", FakeBehaviour::kHttp503);
  server.set_behaviour("document", FakeBehaviour::kHttp503);
  const CliRun r = bench("--quiet --num-requests 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("no request succeeded"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("overloaded"), std::string::npos) << r.err;
}

// A model list refused for want of a key: without --model the run stops saying how to give one
// (and not to give --model); with --model it is only warned about, since a gateway may guard the
// list alone (the fake server guards only the list, so the run then succeeds).
TEST_F(BenchCli, AModelListRefusedForItsKeyNamesTheKeyFlag) {
  server.require_key("sk-right");
  CliRun r = bench("--quiet --num-requests 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("HTTP 401"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--api-key-file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--model"), std::string::npos) << r.err;
  r = bench("--quiet --num-requests 2 --model tiny");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--api-key-file"), std::string::npos) << r.err;
}

// A server that cannot be reached stops the run at once, --model or not (the --model hint would
// only send every request to nothing).
TEST_F(BenchCli, AnUnreachableServerStopsTheRunEvenWithModel) {
  for (const std::string model : {"", " --model tiny"}) {
    const CliRun r = headway::test::run_cli("bench --quiet --url http://127.0.0.1:1 --workload " +
                                            kWorkload.string() + model);
    EXPECT_EQ(r.exit_code, 1) << model;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("cannot connect to http://127.0.0.1:1"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("give --model"), std::string::npos) << r.err;
  }
}

TEST_F(BenchCli, PredictionIsPrintedBesideTheMeasurement) {
  const CliRun r =
      bench("--quiet --predict-config " + kDeployment.string() + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("prediction by two-engines"), std::string::npos) << r.out;
  const nlohmann::json report = read_json();
  ASSERT_TRUE(report.contains("prediction"));
  EXPECT_EQ(report["prediction"]["report"]["deployment"], "two-engines");
  const nlohmann::json& rows = report["prediction"]["comparison"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["name"], "chat");
  EXPECT_EQ(rows[2]["name"], "overall");
  EXPECT_TRUE(rows[0]["ttft_p50"]["predicted"].is_number());
  EXPECT_TRUE(rows[0]["ttft_p50"]["measured"].is_number());
}

// A workload's max_tokens is what simulate's clients ask for; bench sends each request's output
// (a served model ends its answers itself), and its prediction simulates the requests as sent. Here
// max_tokens is beyond the deployment's max_model_len: simulated as written, every request would
// be refused.
TEST_F(BenchCli, ThePredictionSimulatesTheRequestsAsBenchSendsThem) {
  std::string text;
  {
    std::ifstream in(kWorkload);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (size_t at = 0; (at = text.find("[[classes]]\n", at)) != std::string::npos; at += 12) {
    text.insert(at + 12, "max_tokens = 1000000\n");
  }
  const fs::path workload =
      fs::temp_directory_path() / ("headway_bench_asked_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(workload) << text;
  const CliRun r = headway::test::run_cli("bench --quiet --url " + server.url() + " --workload " +
                                          workload.string() + " --predict-config " +
                                          kDeployment.string() + " --out " + out.string());
  fs::remove(workload);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.received().size(), 24u);
  for (const nlohmann::json& body : server.received()) {
    EXPECT_LE(body["max_tokens"].get<uint32_t>(), 6u) << body.dump();
  }
  const nlohmann::json overall = read_json()["prediction"]["report"]["overall"];
  EXPECT_EQ(overall["requests"], 24);
  EXPECT_EQ(overall["finished"], 24) << overall.dump();
}

// A real model as the "prediction" would run the workload again on this machine: said up front.
TEST_F(BenchCli, APredictionByARealModelIsWarnedAbout) {
  const fs::path deployment =
      fs::temp_directory_path() / ("headway_bench_cpu_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(deployment) << "[model]\nplugin = \"cpu\"\noptions = { path = \"/nonexistent\" }\n"
                               "[[engines]]\n[engines.scheduler]\nplugin = \"chunked\"\n"
                               "[router]\nplugin = \"single\"\n";
  const CliRun r = bench("--quiet --num-requests 2 --predict-config " + deployment.string());
  fs::remove(deployment);
  EXPECT_NE(r.err.find("its model 'cpu' is not the simulated one"), std::string::npos) << r.err;
  const CliRun sim = bench("--quiet --num-requests 2 --predict-config " + kDeployment.string());
  EXPECT_EQ(sim.err.find("is not the simulated one"), std::string::npos) << sim.err;
}

// --seed draws the workload as `simulate --seed` does: the server gets that draw's requests.
TEST_F(BenchCli, ASeedDrawsTheWorkloadAsSimulateDoes) {
  const CliRun r = bench("--quiet --seed 12");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  using Lengths = std::vector<std::pair<size_t, uint32_t>>;  // prompt tokens, max_tokens
  const auto drawn = [](std::optional<uint64_t> seed) {
    Lengths out;
    for (const auto& q : headway::core::load_workload(kWorkload, seed).requests) {
      out.emplace_back(q.prompt_tokens, q.output_tokens);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  Lengths sent;
  for (const nlohmann::json& body : server.received()) {
    sent.emplace_back(body["prompt"].size(), body["max_tokens"].get<uint32_t>());
  }
  std::sort(sent.begin(), sent.end());
  EXPECT_EQ(sent, drawn(12));
  EXPECT_NE(sent, drawn(std::nullopt));  // the file's seed, 11, draws other lengths
}

// The same path for the report and the plot is refused before --plot makes a directory of it.
TEST_F(BenchCli, OutAndPlotOnOnePathAreRefusedLeavingNothing) {
  const fs::path same = fs::temp_directory_path() /
                        ("headway_bench_cli_same_" + std::to_string(::getpid()) + ".json");
  const CliRun r = bench("--out " + same.string() + " --plot " + same.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--out and --plot name the same path"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(same));
  EXPECT_TRUE(server.received().empty());
}

TEST_F(BenchCli, BadInputIsOneLineNamingIt) {
  CliRun r = headway::test::run_cli("bench --url localhost:8000 --workload " + kWorkload.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("--url 'localhost:8000'"), std::string::npos) << r.err;

  r = bench("--model other --quiet");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("--model other"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tiny"), std::string::npos) << r.err;

  r = bench("--num-requests 1000 --quiet");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--num-requests 1000"), std::string::npos) << r.err;

  r = headway::test::run_cli("bench --url http://127.0.0.1:1 --workload " + kWorkload.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("http://127.0.0.1:1/v1/models"), std::string::npos) << r.err;
  EXPECT_TRUE(server.received().empty());
}

}  // namespace
