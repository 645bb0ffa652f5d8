// Soak of `headway serve` over HTTP, as issue 5 asks: 2,000 requests against a deployment of two
// engines, from several client threads, with random client disconnects (mid-stream, before the
// first token, and non-streamed requests whose client gives up), bad requests, and complete
// streams. At the end the server process is still alive, every engine is idle with all its KV
// blocks free (read from /metrics), and SIGTERM drains it to exit 0. No assertion depends on time.
#include <gtest/gtest.h>
#include <httplib.h>
#include <tiny_checkpoint.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "serve_process.h"

namespace headway::test {
namespace {

enum class Client { kFullStream, kDisconnectMidStream, kDisconnectAtOnce, kGiveUpUnstreamed, kBad };

// One request of the soak; returns false when the outcome contradicts what the client did.
bool run_one(httplib::Client& http, Client kind, std::mt19937& random, std::string* failure) {
  const int max_tokens = 1 + static_cast<int>(random() % 30);
  const std::string prompt(1 + random() % 60, static_cast<char>('a' + random() % 26));
  const bool stream = kind != Client::kGiveUpUnstreamed;
  std::string body = "{\"model\": \"tiny\", \"prompt\": \"" + prompt +
                     "\", \"max_tokens\": " + std::to_string(max_tokens) +
                     ", \"ignore_eos\": true, \"stream\": " + (stream ? "true" : "false") + "}";
  if (kind == Client::kBad) {
    // Each a 4xx the server must answer without disturbing the others.
    const char* bad[] = {"{\"model\": \"tiny\", \"prompt\": ", "{\"model\": \"tiny\"}",
                         "{\"model\": \"tiny\", \"prompt\": \"x\", \"max_tokens\": 100000}",
                         "{\"model\": \"nope\", \"prompt\": \"x\"}"};
    body = bad[random() % 4];
  }
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body = body;
  request.set_header("Content-Type", "application/json");
  int status = 0;
  size_t chunks = 0;
  const size_t disconnect_after = kind == Client::kDisconnectAtOnce ? 0 : 1 + random() % 5;
  bool saw_done = false;
  request.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (std::string_view(data, size).find("[DONE]") != std::string_view::npos) saw_done = true;
    ++chunks;
    if (status == 200 &&
        (kind == Client::kDisconnectMidStream || kind == Client::kDisconnectAtOnce)) {
      return chunks <= disconnect_after;  // false closes the connection
    }
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  http.send(request, response, error);
  switch (kind) {
    case Client::kFullStream:
      if (status != 200 || !saw_done) {
        *failure = "full stream: status " + std::to_string(status) + ", [DONE] " +
                   (saw_done ? "seen" : "missing") + ", " + httplib::to_string(error);
        return false;
      }
      return true;
    case Client::kBad:
      if (status < 400 || status >= 500) {
        *failure = "bad request answered " + std::to_string(status) + " for " + body;
        return false;
      }
      return true;
    default:  // disconnects: whatever the client saw before it left is fine
      return true;
  }
}

// Reads one sample of /metrics: `name{engine="E",...} value` summed per engine.
std::map<std::string, double> engine_gauge(const std::string& metrics, const std::string& name) {
  std::map<std::string, double> values;
  const std::regex line("^" + name + R"re(\{engine="([0-9]+)"[^}]*\} ([0-9.eE+-]+)$)re");
  std::istringstream in(metrics);
  std::string text;
  while (std::getline(in, text)) {
    std::smatch match;
    if (std::regex_match(text, match, line)) values[match[1].str()] += std::stod(match[2].str());
  }
  return values;
}

// Runs the soak against the server at `port` and checks that every engine ends idle with all its
// KV blocks free (as /metrics reports them) and that aborts reached both engines.
void soak(int port) {
  constexpr int kRequests = 2000;
  constexpr int kClients = 8;
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 random(1000 + c);
      httplib::Client http("127.0.0.1", port);
      http.set_read_timeout(std::chrono::seconds(120));
      while (next.fetch_add(1) < kRequests) {
        const uint32_t roll = random() % 100;
        const Client kind = roll < 40   ? Client::kFullStream
                            : roll < 65 ? Client::kDisconnectMidStream
                            : roll < 75 ? Client::kDisconnectAtOnce
                            : roll < 90 ? Client::kGiveUpUnstreamed
                                        : Client::kBad;
        if (kind == Client::kGiveUpUnstreamed) {
          // A client that stops waiting for a non-streamed answer: its own connection, closed
          // after a few milliseconds, usually while the request is still generating.
          httplib::Client impatient("127.0.0.1", port);
          impatient.set_read_timeout(std::chrono::milliseconds(1 + random() % 5));
          std::string ignored;
          run_one(impatient, kind, random, &ignored);
        } else {
          std::string failure;
          if (!run_one(http, kind, random, &failure)) {
            std::lock_guard<std::mutex> lock(failures_mutex);
            failures.push_back(std::move(failure));
          }
        }
        done.fetch_add(1);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(done.load(), kRequests);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures.front();

  // Disconnects are noticed asynchronously (at the next token or answer): wait until both
  // engines report nothing running or waiting. The bound only keeps a leak from hanging the run.
  httplib::Client http("127.0.0.1", port);
  std::string metrics;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < give_up) {
    const auto response = http.Get("/metrics");
    ASSERT_TRUE(response) << "GET /metrics failed: " << httplib::to_string(response.error());
    metrics = response->body;
    const auto running = engine_gauge(metrics, "headway_num_requests_running");
    const auto waiting = engine_gauge(metrics, "headway_num_requests_waiting");
    bool idle = running.size() == 2 && waiting.size() == 2;
    for (const auto& [engine, value] : running) idle = idle && value == 0.0;
    for (const auto& [engine, value] : waiting) idle = idle && value == 0.0;
    if (idle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto usage = engine_gauge(metrics, "headway_kv_cache_usage_perc");
  ASSERT_EQ(usage.size(), 2u) << metrics;
  for (const auto& [engine, value] : usage) {
    // usage = 1 - free / total: exactly 0 only when every block is free.
    EXPECT_EQ(value, 0.0) << "engine" << engine << " still holds KV blocks\n" << metrics;
  }
  for (const auto& [engine, value] : engine_gauge(metrics, "headway_num_requests_running")) {
    EXPECT_EQ(value, 0.0) << "engine" << engine;
  }
  // The disconnects reached the engines as aborts, on both of them, and many requests completed.
  const std::regex finished(
      R"re(^headway_request_success_total\{engine="([0-9]+)".*finished_reason="([a-z_]+)".*\} ([0-9]+)$)re");
  std::map<std::string, double> aborted_per_engine;
  double completed = 0;
  std::istringstream lines(metrics);
  std::string text;
  while (std::getline(lines, text)) {
    std::smatch match;
    if (!std::regex_match(text, match, finished)) continue;
    if (match[2].str() == "abort") aborted_per_engine[match[1].str()] += std::stod(match[3].str());
    if (match[2].str() == "length") completed += std::stod(match[3].str());
  }
  EXPECT_EQ(aborted_per_engine.size(), 2u) << metrics;
  for (const auto& [engine, count] : aborted_per_engine) {
    EXPECT_GT(count, 0.0) << "engine" << engine;
  }
  EXPECT_GT(completed, 0.0) << metrics;
  std::printf("aborted per engine: %.0f / %.0f, finished by length: %.0f\n",
              aborted_per_engine["0"], aborted_per_engine["1"], completed);
}

TEST(ServeSoak, DisconnectsAndAbortsOverHttpLeaveEveryKvBlockFree) {
  TempDir dir("serve_soak");
  const fs::path config =
      write_tiny_deployment(dir.path, "soak",
                            "[[engines]]\ncount = 2\nscheduler = { plugin = \"chunked\", options = "
                            "{ max_num_batched_tokens = 256, max_num_seqs = 16 } }\n"
                            "[router]\nplugin = \"least_loaded\"\n"
                            "[server]\nhttp_port = 0\ngrpc_port = 0\ndrain_timeout_s = 30\n");
  ServeProcess serve(config);
  const std::optional<std::string> address =
      serve.wait_for_line(std::regex(R"(HTTP listening on http://127\.0\.0\.1:([0-9]+))"));
  ASSERT_TRUE(address.has_value()) << serve.log();
  serve.keep_reading();
  soak(std::stoi(*address));
  ASSERT_TRUE(serve.alive()) << serve.log();
  EXPECT_EQ(serve.stop(SIGTERM), 0) << serve.log();
}

// The same soak through a router process in front of two engine processes: the disconnects
// become cancelled calls between the processes, and each engine process must still free every
// block (the router's /metrics mirrors what the engine processes report).
TEST(ServeSoak, DisconnectsThroughARouterProcessLeaveEveryEngineProcessesKvFree) {
  TempDir dir("serve_soak_processes");
  // Prompts are 2-61 tokens: 32 and longer go to the long pool, so both processes serve.
  RoutedEngineProcesses cluster(dir.path, /*long_from=*/32, /*load_report_interval_s=*/0.02);
  soak(cluster.http_port());
  for (size_t e = 0; e < 2; ++e) ASSERT_TRUE(cluster.engine(e).alive()) << cluster.engine(e).log();
  ASSERT_TRUE(cluster.router().alive()) << cluster.router().log();
  EXPECT_EQ(cluster.router().stop(SIGTERM), 0) << cluster.router().log();
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(cluster.engine(e).stop(SIGTERM), 0) << cluster.engine(e).log();
  }
}

}  // namespace
}  // namespace headway::test
