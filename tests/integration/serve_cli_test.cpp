// `headway serve` as an operator runs it: a subprocess on ephemeral ports with the CPU tiny model,
// probed with curl (/health, /v1/completions, /v1/models, /metrics checked by promtool), then
// stopped with SIGTERM, which must drain and exit 0. The test starts and stops everything it uses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <tiny_checkpoint.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "../unit/serving/metrics/promtool_check.h"
#include "../unit/test_support/listening_socket.h"
#include "serve_process.h"

namespace headway::test {
namespace {

// "http://127.0.0.1:<port>" once `serve` reports its HTTP address; empty when it exits first.
std::string http_base(ServeProcess& serve) {
  const std::optional<std::string> http =
      serve.wait_for_line(std::regex(R"(HTTP listening on http://(127\.0\.0\.1:[0-9]+))"));
  return http ? "http://" + *http : std::string();
}

bool have_curl() { return std::system("command -v curl >/dev/null 2>&1") == 0; }

// Waits (bounded, so that a process that does not exit fails the test instead of hanging it) for
// the process to exit; kills it when it does not.
bool exits_within_a_minute(ServeProcess& serve) {
  for (int i = 0; i < 600 && serve.alive(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (serve.alive()) {
    serve.signal(SIGKILL);
    return false;
  }
  return true;
}

TEST(ServeCli, ServesOverHttpAndDrainsOnSigterm) {
  TempDir dir;
  const fs::path config =
      write_tiny_deployment(dir.path, "serve-test",
                            "[[engines]]\nscheduler = \"chunked\"\n"
                            "[server]\nhttp_port = 0\ngrpc_port = 0\ndrain_timeout_s = 5\n");

  ServeProcess serve(config);
  const std::string base = http_base(serve);
  ASSERT_FALSE(base.empty()) << "headway serve did not report an HTTP address:\n" << serve.log();
  if (!have_curl()) {
    EXPECT_EQ(serve.stop(SIGTERM), 0) << serve.log();
    GTEST_SKIP() << "curl is not installed";
  }

  const CurlResult health = curl(base + "/health");
  EXPECT_EQ(health.http_status, 200) << health.body;

  const CurlResult models = curl(base + "/v1/models");
  EXPECT_EQ(models.http_status, 200) << models.body;
  EXPECT_NE(models.body.find("\"tiny\""), std::string::npos) << models.body;

  const CurlResult completion = curl(
      "-H 'Content-Type: application/json' -d '{\"model\": \"tiny\", \"prompt\": \"hello\", "
      "\"max_tokens\": 5}' " +
      base + "/v1/completions");
  EXPECT_EQ(completion.http_status, 200) << completion.body;
  EXPECT_NE(completion.body.find("\"choices\""), std::string::npos) << completion.body;

  const CurlResult bad = curl(
      "-H 'Content-Type: application/json' -d '{\"model\": \"tiny\", "
      "\"prompt\": \"hello\", \"max_tokens\": 5, \"top_p\": 7}' " +
      base + "/v1/completions");
  EXPECT_EQ(bad.http_status, 400) << bad.body;
  // Refused before the service saw it (not JSON), and counted all the same.
  const CurlResult not_json =
      curl("-H 'Content-Type: application/json' -d '{\"prompt\": ' " + base + "/v1/completions");
  EXPECT_EQ(not_json.http_status, 400) << not_json.body;

  const CurlResult metrics = curl(base + "/metrics");
  EXPECT_EQ(metrics.http_status, 200);
  EXPECT_NE(metrics.body.find("headway_request_success_total{engine=\"0\",pool=\"\","
                              "request_class=\"completion\",finished_reason="),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("headway_request_rejected_total{reason=\"invalid\"} 2"),
            std::string::npos)
      << metrics.body;
  if (auto check = promtool_check_metrics(metrics.body)) {
    EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << metrics.body;
  }

  EXPECT_EQ(serve.stop(SIGTERM), 0) << serve.log();
  EXPECT_NE(serve.log().find("draining"), std::string::npos) << serve.log();
}

// [server] log_stats_interval_s: while a request streams, stats lines give its rates and the
// load; once it ended, the idle server prints none (a line per interval would need many more).
TEST(ServeCli, LogsStatsWhileBusyAndNothingWhileIdle) {
  if (!have_curl()) GTEST_SKIP() << "curl is not installed";
  TempDir dir;
  constexpr double kInterval = 0.05;
  const fs::path config = write_tiny_deployment(
      dir.path, "stats-test",
      "[[engines]]\nscheduler = \"chunked\"\n[server]\nhttp_port = 0\ngrpc_port = 0\n"
      "drain_timeout_s = 5\nlog_stats_interval_s = " +
          std::to_string(kInterval) + "\n");
  ServeProcess serve(config);
  const std::string base = http_base(serve);
  ASSERT_FALSE(base.empty()) << "headway serve did not report an HTTP address:\n" << serve.log();
  const auto started = std::chrono::steady_clock::now();
  const CurlResult completion = curl(
      "-H 'Content-Type: application/json' -d '{\"prompt\": \"hello\", \"max_tokens\": 400, "
      "\"ignore_eos\": true}' " +
      base + "/v1/completions");
  const double busy =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(completion.http_status, 200) << completion.body;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // 10 idle intervals
  ASSERT_EQ(serve.stop(SIGTERM), 0) << serve.log();

  const std::regex stats(
      R"(headway serve: prompt ([0-9.]+) tokens/s, generation ([0-9.]+) tokens/s, running ([0-9]+), waiting ([0-9]+), KV cache ([0-9.]+)% used)");
  const std::string& log = serve.log();
  int lines = 0;
  double generated = 0.0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), stats); it != std::sregex_iterator();
       ++it) {
    ++lines;
    generated += std::stod((*it)[2].str()) * kInterval;  // about the tokens of that interval
  }
  ASSERT_GT(lines, 0) << log;
  EXPECT_GT(generated, 0.0) << log;
  // Busy intervals, the one the request ended in and one of slack; idle ones would add ten more.
  EXPECT_LE(lines, static_cast<int>(busy / kInterval) + 2) << "busy " << busy << " s\n" << log;
}

// `serve --step-trace` writes every step the engine ran, in simulate's format: a 4-token prompt
// and 5 output tokens are one prefill step of the whole prompt (which samples the first token) and
// 4 decode steps, each with a positive duration, in the order the engine's clock ran them.
TEST(ServeCli, StepTraceRecordsEveryStepTheEngineRan) {
  TempDir dir("serve_trace");
  const fs::path config =
      write_tiny_deployment(dir.path, "serve-trace",
                            "[[engines]]\nscheduler = \"chunked\"\n"
                            "[server]\nhttp_port = 0\ngrpc_port = 0\ndrain_timeout_s = 5\n");
  const fs::path trace = dir.path / "steps.jsonl";
  ServeProcess serve(config, {"--step-trace", trace.string()});
  const std::string base = http_base(serve);
  ASSERT_FALSE(base.empty()) << "headway serve did not report an HTTP address:\n" << serve.log();
  if (!have_curl()) {
    EXPECT_EQ(serve.stop(SIGTERM), 0) << serve.log();
    GTEST_SKIP() << "curl is not installed";
  }
  const CurlResult completion = curl(
      "-H 'Content-Type: application/json' -d '{\"model\": \"tiny\", \"prompt\": [5, 6, 7, 8], "
      "\"max_tokens\": 5, \"ignore_eos\": true}' " +
      base + "/v1/completions");
  ASSERT_EQ(completion.http_status, 200) << completion.body;
  ASSERT_EQ(serve.stop(SIGTERM), 0) << serve.log();

  std::ifstream in(trace);
  ASSERT_TRUE(in) << trace << " was not written";
  std::vector<nlohmann::json> steps;
  for (std::string line; std::getline(in, line);) steps.push_back(nlohmann::json::parse(line));
  // First the engine's model line, as `profile --from-step-trace` needs it.
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps[0]["engine"], 0);
  EXPECT_EQ(steps[0]["model"]["plugin"], "cpu");
  EXPECT_EQ(steps[0]["model"]["block_size"], 16);
  steps.erase(steps.begin());
  ASSERT_EQ(steps.size(), 5u) << "steps traced";
  double last_end = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const nlohmann::json& step = steps[i];
    EXPECT_EQ(step["engine"], 0);
    EXPECT_GT(step["duration"].get<double>(), 0.0);
    EXPECT_GE(step["t"].get<double>(), last_end - 2e-6);  // both printed to the microsecond
    last_end = step["t"].get<double>() + step["duration"].get<double>();
    ASSERT_EQ(step["slices"].size(), 1u);
    const nlohmann::json& slice = step["slices"][0];
    EXPECT_EQ(slice["kind"], i == 0 ? "prefill" : "decode");
    EXPECT_EQ(slice["start"], i == 0 ? 0 : 3 + i);
    EXPECT_EQ(slice["tokens"], i == 0 ? 4 : 1);
    EXPECT_EQ(slice["sample"], true);  // the whole prompt in one chunk, then decodes
  }
}

// A router process runs no engine: --step-trace there is refused, naming the file and the role.
TEST(ServeCli, StepTraceOnARouterProcessIsRefused) {
  TempDir dir("serve_trace_router");
  const fs::path config =
      write_tiny_deployment(dir.path, "serve-trace-router",
                            "[[engines]]\naddress = \"127.0.0.1:1\"\n"
                            "[server]\nrole = \"router\"\nhttp_port = 0\ngrpc_port = 0\n"
                            "engine_connect_timeout_s = 0.5\n");
  const fs::path trace = dir.path / "steps.jsonl";
  ServeProcess serve(config, {"--step-trace", trace.string()});
  EXPECT_NE(serve.stop(0), 0);
  EXPECT_FALSE(fs::exists(trace));
  EXPECT_NE(serve.log().find("role = \"router\""), std::string::npos) << serve.log();
  EXPECT_NE(serve.log().find("--step-trace"), std::string::npos) << serve.log();
}

// An engine process has no HTTP frontend: --port was ignored there without a word (an operator
// then looked for /metrics on that port); now it is refused before the model loads.
TEST(ServeCli, AnHttpPortForAnEngineProcessIsRefused) {
  TempDir dir("serve_engine_port");
  const fs::path config = write_tiny_deployment(dir.path, "serve-engine-port",
                                                "[[engines]]\n[server]\nrole = \"engine\"\n"
                                                "grpc_port = 0\n");
  ServeProcess serve(config, {"--port", "0"});
  EXPECT_EQ(serve.stop(0), 1) << serve.log();
  EXPECT_NE(serve.log().find("serve: --port: an engine process ([server] role = \"engine\" in "),
            std::string::npos)
      << serve.log();
  EXPECT_EQ(serve.log().find("gRPC listening"), std::string::npos) << serve.log();
}

// An operator who does not want to wait for the drain sends the signal again: what is in flight
// is aborted at once. (The drain timeout is long enough to tell the two apart; a request of 4,000
// tokens on the slow checkpoint runs far longer than the test waits.)
TEST(ServeCli, ASecondSignalEndsTheDrainAtOnce) {
  TempDir dir;
  const fs::path config =
      write_tiny_deployment(dir.path, "hurry",
                            "[[engines]]\nscheduler = \"chunked\"\n"
                            "[server]\nhttp_port = 0\ngrpc_port = 0\ndrain_timeout_s = 300\n");
  RoutedEngineProcesses::use_slow_checkpoint(dir.path, config);
  {
    std::ifstream in(config);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    text = std::regex_replace(text, std::regex("max_model_len = 512"), "max_model_len = 4200");
    std::ofstream(config) << std::regex_replace(text, std::regex("kv_cache_gb = 0.02"),
                                                "kv_cache_gb = 0.2");
  }
  ServeProcess serve(config);
  const std::string base = http_base(serve);
  ASSERT_FALSE(base.empty()) << "headway serve did not report an HTTP address:\n" << serve.log();
  if (!have_curl()) {
    EXPECT_EQ(serve.stop(SIGTERM), 0) << serve.log();
    GTEST_SKIP() << "curl is not installed";
  }
  std::string streamed;
  std::thread client([&] {
    streamed = curl(
                   "-N -H 'Content-Type: application/json' -d '{\"model\": \"slow\", \"prompt\": "
                   "\"hello\", \"max_tokens\": 4000, \"ignore_eos\": true, \"stream\": true}' " +
                   base + "/v1/completions")
                   .body;
  });
  // Until the request runs (bounded only so that a broken server cannot hang the run).
  const std::regex running(R"(headway_num_requests_running(\{[^}]*\})? 1)");
  bool in_flight = false;
  for (int i = 0; i < 1200 && !in_flight; ++i) {
    in_flight = std::regex_search(curl(base + "/metrics").body, running);
    if (!in_flight) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(in_flight) << serve.log();

  serve.signal(SIGTERM);
  EXPECT_TRUE(serve.wait_for_line(std::regex("(draining)")).has_value()) << serve.log();
  serve.signal(SIGINT);
  EXPECT_EQ(serve.stop(0), 0) << serve.log();  // signal 0: only waits for the exit
  client.join();
  EXPECT_NE(serve.log().find("SIGINT again: aborting what is in flight now"), std::string::npos)
      << serve.log();
  EXPECT_NE(serve.log().find("stopped (1 requests aborted when the drain was cut short)"),
            std::string::npos)
      << serve.log();
  // The client's stream says why it ended.
  EXPECT_NE(streamed.find("the request was aborted: the server is shutting down, and its drain "
                          "ended before the request finished"),
            std::string::npos)
      << streamed;
}

// A KV transport whose transfer never ends holds its request: the host cannot take back blocks the
// transport may still write, and an aborted request waits for it. The drain (here 1 s) aborts it,
// and 10 s later the process exits, saying why, instead of waiting for ever (only SIGKILL ended
// it before: helper-120's walk).
TEST(ServeCli, AKvTransferThatNeverEndsDoesNotHoldTheProcessAtShutdown) {
  TempDir dir;
  const std::string transport = std::string(HEADWAY_TEST_PLUGIN_DIR) + "/test_failing_transport.so";
  const fs::path config =
      write_tiny_deployment(dir.path, "stuck",
                            "[[engines]]\nrole = \"prefill\"\nscheduler = \"chunked\"\n"
                            "[[engines]]\nrole = \"decode\"\nscheduler = \"chunked\"\n"
                            "[router]\nplugin = \"disaggregated\"\n"
                            "[kv_transport]\nplugin = \"" +
                                transport +
                                "\"\noptions = { pending_s = 3600.0 }\n"
                                "[server]\nhttp_port = 0\ngrpc_port = 0\ndrain_timeout_s = 1\n");
  ServeProcess serve(config);
  const std::string base = http_base(serve);
  ASSERT_FALSE(base.empty()) << "headway serve did not report an HTTP address:\n" << serve.log();
  if (!have_curl()) {
    serve.signal(SIGKILL);
    GTEST_SKIP() << "curl is not installed";
  }
  std::thread client([&] {
    curl(
        "-m 60 -H 'Content-Type: application/json' -d '{\"model\": \"tiny\", \"prompt\": "
        "\"hello\", \"max_tokens\": 4}' " +
        base + "/v1/completions");
  });
  // Until the prefill engine has computed the prompt (its transfer starts right after).
  const std::regex prefilled(R"(headway_iteration_prefill_tokens_count\{engine="0"[^}]*\} [1-9])");
  bool handed_off = false;
  for (int i = 0; i < 1200 && !handed_off; ++i) {
    handed_off = std::regex_search(curl(base + "/metrics").body, prefilled);
    if (!handed_off) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(handed_off) << serve.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  serve.signal(SIGTERM);
  const bool exited = exits_within_a_minute(serve);
  EXPECT_TRUE(exited) << "still running 60 s after SIGTERM";
  EXPECT_EQ(serve.stop(0), exited ? 1 : 128 + SIGKILL) << serve.log();
  client.join();
  EXPECT_NE(serve.log().find("requests still in flight 10 s after they were aborted (a KV "
                             "transfer whose poll() never ends, or an engine step"),
            std::string::npos)
      << serve.log();
}

TEST(ServeCli, ARouterWhoseEngineProcessesNeverAnswerExitsNamingEach) {
  TempDir dir;
  // Port 1 on loopback: nothing listens there (connection refused at once).
  const fs::path config = write_tiny_deployment(
      dir.path, "router",
      "[[engines]]\naddress = \"127.0.0.1:1\"\n[[engines]]\naddress = \"127.0.0.1:2\"\n"
      "[server]\nrole = \"router\"\nhttp_port = 0\ngrpc_port = 0\n"
      "engine_connect_timeout_s = 0.5\n");
  ServeProcess serve(config);
  EXPECT_FALSE(serve.wait_for_line(std::regex("(listening)")).has_value());
  EXPECT_EQ(serve.stop(SIGTERM), 1) << serve.log();
  EXPECT_NE(serve.log().find("no engine process answered within 0.5 s"), std::string::npos)
      << serve.log();
  EXPECT_NE(serve.log().find("engine0 at 127.0.0.1:1"), std::string::npos) << serve.log();
  EXPECT_NE(serve.log().find("engine1 at 127.0.0.1:2"), std::string::npos) << serve.log();
}

// A deployment of the test model whose create() takes `load_s` (it logs when its load begins).
fs::path slow_loading_deployment(const fs::path& dir, double load_s) {
  const fs::path config = dir / "slow.toml";
  std::ofstream(config) << "name = \"slow\"\n[model]\nplugin = \"" << HEADWAY_TEST_PLUGIN_DIR
                        << "/test_slow_model.so\"\noptions = { load_s = " << load_s
                        << ", first_forward_s = 0.0 }\n[[engines]]\nkv_blocks = 64\n"
                        << "[server]\nhttp_port = 0\ngrpc_port = 0\n";
  return config;
}

// SIGTERM while the model loads: nothing is in flight, so serve stops once the load returns,
// without binding its ports (an orchestrator's SIGTERM or a Ctrl-C was not taken until the
// frontends had started: helper-130's walk).
TEST(ServeCli, ASignalDuringTheModelsLoadStopsServeBeforeItServes) {
  TempDir dir;
  // A load long enough that the signal surely comes before it ends, on a loaded machine too.
  ServeProcess serve(slow_loading_deployment(dir.path, 10.0));
  ASSERT_TRUE(serve.wait_for_line(std::regex("(test_slow: loading)")).has_value()) << serve.log();
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.stop(0), 128 + SIGTERM) << serve.log();
  EXPECT_NE(serve.log().find("SIGTERM during start-up: stopping without serving once what is "
                             "loading returns"),
            std::string::npos)
      << serve.log();
  EXPECT_NE(serve.log().find("stopped during start-up, before serving"), std::string::npos)
      << serve.log();
  EXPECT_EQ(serve.log().find("listening"), std::string::npos) << serve.log();
}

// A second signal during start-up does not wait for the load (here ten minutes).
TEST(ServeCli, ASecondSignalDuringStartUpExitsAtOnce) {
  TempDir dir;
  ServeProcess serve(slow_loading_deployment(dir.path, 600.0));
  ASSERT_TRUE(serve.wait_for_line(std::regex("(test_slow: loading)")).has_value()) << serve.log();
  serve.signal(SIGTERM);
  ASSERT_TRUE(serve.wait_for_line(std::regex("(SIGTERM during start-up)")).has_value())
      << serve.log();
  serve.signal(SIGINT);
  EXPECT_TRUE(exits_within_a_minute(serve)) << "still loading a minute after the second signal";
  EXPECT_EQ(serve.stop(0), 128 + SIGINT) << serve.log();
  EXPECT_NE(serve.log().find("SIGINT again during start-up: exiting now"), std::string::npos)
      << serve.log();
}

// A router waiting for engine processes that are not there (here up to ten minutes) stops waiting
// at the first signal.
TEST(ServeCli, ASignalEndsARoutersWaitForItsEngineProcesses) {
  TempDir dir;
  const fs::path config = write_tiny_deployment(
      dir.path, "router",
      "[[engines]]\naddress = \"127.0.0.1:1\"\n[server]\nrole = \"router\"\nhttp_port = 0\n"
      "grpc_port = 0\nengine_connect_timeout_s = 600\n");
  ServeProcess serve(config);
  ASSERT_TRUE(
      serve.wait_for_line(std::regex("(waiting up to 600 s for 1 engine process)")).has_value())
      << serve.log();
  serve.signal(SIGTERM);
  EXPECT_TRUE(exits_within_a_minute(serve)) << "still waiting a minute after SIGTERM";
  EXPECT_EQ(serve.stop(0), 128 + SIGTERM) << serve.log();
  EXPECT_NE(serve.log().find("start-up stopped: " + config.string() +
                             ": asked to stop while waiting for the engine processes"),
            std::string::npos)
      << serve.log();
}

// A port another process listens on is refused before the service starts (which loads the model,
// or, for a router, waits up to engine_connect_timeout_s for its engine processes): here the router
// would otherwise wait 30 s for an engine that never answers and only then report that.
TEST(ServeCli, ABusyPortIsRefusedBeforeTheServiceStarts) {
  TempDir dir;
  const ListeningSocket taken;
  const std::string busy = std::to_string(taken.port());
  const fs::path config = write_tiny_deployment(
      dir.path, "router",
      "[[engines]]\naddress = \"127.0.0.1:1\"\n[server]\nrole = \"router\"\nhttp_port = " + busy +
          "\ngrpc_port = 0\nengine_connect_timeout_s = 30\n");
  ServeProcess serve(config);
  EXPECT_EQ(serve.stop(0), 1) << serve.log();  // signal 0: waits for its exit
  EXPECT_NE(
      serve.log().find("HTTP frontend cannot listen on 127.0.0.1:" + busy + ": the port is in use"),
      std::string::npos)
      << serve.log();
  EXPECT_EQ(serve.log().find("no engine process answered"), std::string::npos) << serve.log();
}

// An engine process serving its own checkpoint `name` (of `spec`) on an ephemeral gRPC port;
// returns the process and sets `address`.
std::unique_ptr<ServeProcess> engine_process_of(const fs::path& dir, const std::string& name,
                                                const models::cpu::TinyModelSpec& spec,
                                                std::string& address) {
  models::cpu::write_tiny_checkpoint(spec, dir / name);
  const fs::path config = dir / (name + ".toml");
  std::ofstream(config) << "name = \"engine-" << name << "\"\n[model]\nplugin = \"cpu\"\n"
                        << "options = { path = \"" << name
                        << "\", threads = 1, kv_cache_gb = 0.02, max_model_len = 512 }\n"
                        << "[[engines]]\n[server]\nrole = \"engine\"\ngrpc_port = 0\n";
  auto engine = std::make_unique<ServeProcess>(config);
  const std::optional<std::string> port =
      engine->wait_for_line(std::regex(R"(gRPC listening on 127\.0\.0\.1:([0-9]+))"));
  if (!port) throw std::runtime_error("engine process did not start:\n" + engine->log());
  engine->keep_reading();
  address = "127.0.0.1:" + *port;
  return engine;
}

// The same, of the tiny shape with `vocab` tokens.
std::unique_ptr<ServeProcess> engine_process_of(const fs::path& dir, const std::string& name,
                                                uint32_t vocab, std::string& address) {
  models::cpu::TinyModelSpec spec = tiny_test_spec();
  spec.vocab = vocab;
  return engine_process_of(dir, name, spec, address);
}

// A router checks its engine processes against its own checkpoint ([model] path), not against
// whichever process answered first: one whose model has another vocabulary is refused, naming
// both. One of the same vocabulary under another name (another checkpoint directory: two
// fine-tunes of one base share vocabulary and tokenizer) is served, with a warning.
TEST(ServeCli, ARouterChecksItsEngineProcessesAgainstItsOwnCheckpoint) {
  TempDir dir;
  const uint32_t vocab = tiny_test_spec().vocab;
  const auto router_config = [&](const std::string& address) {
    return write_tiny_deployment(dir.path, "router",
                                 "[[engines]]\naddress = \"" + address +
                                     "\"\n[server]\nrole = \"router\"\nhttp_port = 0\n"
                                     "grpc_port = 0\nengine_connect_timeout_s = 30\n");
  };
  {
    std::string address;
    auto wider = engine_process_of(dir.path, "wider", vocab + 64, address);
    ServeProcess router(router_config(address));
    EXPECT_FALSE(router.wait_for_line(std::regex("(HTTP listening)")).has_value());
    EXPECT_EQ(router.stop(SIGTERM), 1) << router.log();
    EXPECT_NE(router.log().find("engine0 at " + address + " serves a model with a vocabulary of " +
                                std::to_string(vocab + 64) +
                                ", and the router's checkpoint ([model] path) one of " +
                                std::to_string(vocab)),
              std::string::npos)
        << router.log();
    EXPECT_EQ(wider->stop(SIGTERM), 0) << wider->log();
  }
  std::string address;
  auto renamed = engine_process_of(dir.path, "tuned", vocab, address);
  ServeProcess router(router_config(address));
  EXPECT_TRUE(router.wait_for_line(std::regex("(HTTP listening)")).has_value()) << router.log();
  EXPECT_EQ(router.stop(SIGTERM), 0) << router.log();
  EXPECT_NE(
      router.log().find("engine0 at " + address + " serves model 'tuned' and this router 'tiny'"),
      std::string::npos)
      << router.log();
  EXPECT_EQ(renamed->stop(SIGTERM), 0) << renamed->log();
}

// Two mixed engine processes of one vocabulary and tokenizer but another KV shape (as Llama 3.1 8B
// and 70B): no KV moves between them, so the router serves, warning that answers depend on the
// process. (Prefill and decode processes of two shapes are refused: ServeProcesses.
// ARouterRefusesADecodeProcessOfAnotherModelsShape.)
TEST(ServeCli, ARouterWarnsOfMixedEngineProcessesOfAnotherModelsShape) {
  TempDir dir;
  std::string tiny_address, other_address;
  auto tiny = engine_process_of(dir.path, "tiny", tiny_test_spec(), tiny_address);
  models::cpu::TinyModelSpec other_spec = tiny_test_spec();
  other_spec.layers = 1;
  other_spec.kv_heads = 4;
  auto other = engine_process_of(dir.path, "tiny_other", other_spec, other_address);
  ServeProcess router(write_tiny_deployment(
      dir.path, "router",
      "[[engines]]\naddress = \"" + tiny_address + "\"\n[[engines]]\naddress = \"" + other_address +
          "\"\n[server]\nrole = \"router\"\nhttp_port = 0\ngrpc_port = 0\n"
          "engine_connect_timeout_s = 30\n"));
  EXPECT_TRUE(router.wait_for_line(std::regex("(HTTP listening)")).has_value()) << router.log();
  EXPECT_EQ(router.stop(SIGTERM), 0) << router.log();
  EXPECT_NE(router.log().find("engine1 at " + other_address +
                              " serves a model of 1 layers x 4 KV heads x 16 dims, the first "
                              "process that answered one of 2 layers x 2 KV heads x 16 dims"),
            std::string::npos)
      << router.log();
  EXPECT_EQ(tiny->stop(SIGTERM), 0) << tiny->log();
  EXPECT_EQ(other->stop(SIGTERM), 0) << other->log();
}

}  // namespace
}  // namespace headway::test
