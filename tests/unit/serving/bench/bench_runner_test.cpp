// run_bench against a fake OpenAI server: what is sent matches the workload, what comes back is
// measured and failures are counted per class. Assertions are on counts, contents and order.
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/report.h>
#include <headway/core/synthetic_prompt.h>
#include <headway/core/workload.h>
#include <headway/serving/bench/bench_runner.h>
#include <headway/serving/bench/bench_summary.h>
#include <headway/serving/bench/server_endpoint.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "fake_openai_server.h"

namespace headway::serving::bench {
namespace {

using test::FakeBehaviour;
using test::FakeOpenAiServer;

// A model list refused with an OpenAI error body: the error line quotes its message whole (it was
// cut at 200 bytes of the raw JSON, mid-string).
TEST(ModelList, AnErrorAnswerIsQuotedByItsMessage) {
  httplib::Server server;
  const std::string message = "no route " + std::string(250, 'x') + " END";
  server.Get("/v2/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(nlohmann::json{{"error", {{"message", message}, {"type", "not_found"}}}}.dump(),
                    "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listener([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::string error;
  try {
    list_models(parse_server_url("http://127.0.0.1:" + std::to_string(port) + "/v2"));
  } catch (const core::Error& e) {
    error = e.what();
  }
  server.stop();
  listener.join();
  EXPECT_NE(error.find("HTTP 404: " + message), std::string::npos) << error;
}

// A server that accepts the connection and answers nothing is named after the model list's wait
// (here --timeout's 0.5 s, shorter than kModelListTimeoutS), not after 600 s of silence.
TEST(ModelList, AServerThatSaysNothingIsNamedSoon) {
  httplib::Server server;
  server.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    res.set_content("{}", "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listener([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ServerEndpoint endpoint = parse_server_url("http://127.0.0.1:" + std::to_string(port));
  endpoint.read_timeout_s = 0.5;
  std::string error;
  try {
    list_models(endpoint);
  } catch (const core::Error& e) {
    error = e.what();
  }
  server.stop();
  listener.join();
  EXPECT_NE(error.find("accepted the connection but sent no answer in 0.5 s"), std::string::npos)
      << error;
}

const std::filesystem::path kWorkload =
    std::filesystem::path(HEADWAY_SOURCE_DIR) / "tests/unit/serving/bench/data/two_classes.toml";

class BenchRunnerTest : public ::testing::Test {
 protected:
  BenchOptions options(size_t max_concurrency) const {
    BenchOptions o;
    o.endpoint = parse_server_url(server.url());
    o.model = "tiny";
    o.token_ids = token_id_range(320u);
    o.max_concurrency = max_concurrency;
    return o;
  }

  size_t count_class(const std::string& name) const {
    size_t n = 0;
    for (const core::WorkloadRequest& r : workload.requests)
      n += workload.classes[r.class_index].name == name;
    return n;
  }

  FakeOpenAiServer server;
  const core::Workload workload = core::load_workload(kWorkload);
};

TEST_F(BenchRunnerTest, SendsTheWorkloadsRequestsInArrivalOrder) {
  ASSERT_EQ(workload.requests.size(), 24u);
  ASSERT_GT(count_class("document"), 0u);
  ASSERT_GT(count_class("chat"), 0u);
  const BenchOptions o = options(1);  // one sender: the server sees the sends in their order
  const BenchRun run = run_bench(workload, o);

  const std::vector<nlohmann::json> received = server.received();
  ASSERT_EQ(received.size(), workload.requests.size());
  for (size_t i = 0; i < received.size(); ++i) {
    const core::WorkloadRequest& r = workload.requests[i];
    const nlohmann::json& body = received[i];
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(body["prompt"].get<std::vector<int32_t>>(),
              core::synthetic_prompt(workload.seed, r, o.token_ids));
    EXPECT_EQ(body["prompt"].size(), r.prompt_tokens);
    EXPECT_EQ(body["max_tokens"], r.output_tokens);
    EXPECT_EQ(body["request_class"], workload.classes[r.class_index].name);
    EXPECT_EQ(body["model"], "tiny");
    EXPECT_EQ(body["stream"], true);
    EXPECT_EQ(body["ignore_eos"], true);
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
  }

  ASSERT_EQ(run.records.size(), workload.requests.size());
  for (size_t i = 0; i < run.records.size(); ++i) {
    const core::RequestRecord& rec = run.records[i];
    SCOPED_TRACE("record " + std::to_string(i));
    EXPECT_TRUE(run.results[i].ok()) << run.results[i].message;
    EXPECT_TRUE(rec.finished);
    EXPECT_EQ(rec.id, workload.requests[i].id);
    EXPECT_EQ(rec.class_index, workload.requests[i].class_index);
    EXPECT_EQ(rec.output_tokens, workload.requests[i].output_tokens);
    ASSERT_EQ(rec.token_times.size(), rec.output_tokens);
    EXPECT_LE(rec.arrival, rec.first_token);
    EXPECT_EQ(rec.first_token, rec.token_times.front());
    EXPECT_TRUE(std::is_sorted(rec.token_times.begin(), rec.token_times.end()));
    EXPECT_LE(rec.token_times.back(), rec.finish);
    EXPECT_EQ(run.results[i].usage_completion_tokens, workload.requests[i].output_tokens);
    EXPECT_EQ(rec.cached_tokens, workload.requests[i].prompt_tokens / 2);
  }
  EXPECT_TRUE(run.cached_tokens_reported);
  // Sent in order: each send is no earlier than the one before it.
  for (size_t i = 1; i < run.records.size(); ++i) {
    EXPECT_LE(run.records[i - 1].arrival, run.records[i].arrival);
  }
  EXPECT_EQ(run.sender_threads, 1u);

  const core::Report report = core::build_report(workload, run.records, 0, 0, run.wall_seconds);
  ASSERT_EQ(report.classes.size(), 2u);
  EXPECT_EQ(report.classes[0].name, "chat");
  EXPECT_EQ(report.classes[0].finished, count_class("chat"));
  EXPECT_EQ(report.classes[1].finished, count_class("document"));
  EXPECT_EQ(report.overall.ttft.count, workload.requests.size());
}

TEST_F(BenchRunnerTest, ManySendersSendEveryRequestExactlyOnce) {
  const BenchRun run = run_bench(workload, options(8));
  using Key = std::tuple<std::string, size_t, uint32_t>;  // class, prompt length, max_tokens
  std::vector<Key> sent, expected;
  for (const nlohmann::json& body : server.received()) {
    sent.emplace_back(body["request_class"], body["prompt"].size(), body["max_tokens"]);
  }
  for (const core::WorkloadRequest& r : workload.requests) {
    expected.emplace_back(workload.classes[r.class_index].name, r.prompt_tokens, r.output_tokens);
  }
  std::sort(sent.begin(), sent.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(sent, expected);
  EXPECT_LE(run.sender_threads, 8u);
  for (const StreamResult& r : run.results) EXPECT_TRUE(r.ok()) << r.message;
}

TEST_F(BenchRunnerTest, ASlowServerDoesNotHoldBackTheArrivals) {
  // The server answers nothing until every request has arrived: only an open loop gets there.
  for (const char* c : {"chat", "document"}) server.set_behaviour(c, FakeBehaviour::kHold);
  BenchRun run;
  std::thread bench([&] { run = run_bench(workload, options(64)); });
  EXPECT_TRUE(server.wait_until_held(workload.requests.size()))
      << "not every request reached the server while the others were held";
  server.release_held();
  bench.join();
  EXPECT_EQ(run.peak_in_flight, workload.requests.size());
  for (const StreamResult& r : run.results) EXPECT_TRUE(r.ok()) << r.message;
}

// A stop (Ctrl-C, SIGTERM) ends the run without waiting for the server: no request is sent after
// it, and the streams in flight, which this server holds without a byte, are shut down and fail as
// interrupted (they would otherwise hold the run until --timeout).
TEST_F(BenchRunnerTest, AStopEndsTheRunAndCutsItsStreams) {
  for (const char* c : {"chat", "document"}) server.set_behaviour(c, FakeBehaviour::kHold);
  std::atomic<bool> stop{false};
  BenchOptions o = options(4);  // four in flight, the fifth waits for a free sender
  o.stop = &stop;
  BenchRun run;
  std::thread bench([&] { run = run_bench(workload, o); });
  ASSERT_TRUE(server.wait_until_held(4));
  stop = true;
  bench.join();
  server.release_held();  // its handlers now write to closed connections
  EXPECT_TRUE(run.interrupted);
  EXPECT_EQ(run.requests_sent, 4u);
  ASSERT_EQ(run.results.size(), workload.requests.size());
  for (size_t i = 0; i < run.requests_sent; ++i) {
    EXPECT_EQ(run.results[i].failure, FailureKind::kInterrupted)
        << i << ": " << run.results[i].message;
  }
}

TEST_F(BenchRunnerTest, HttpErrorsAreCountedPerClassAndTheRunGoesOn) {
  server.set_behaviour("document", FakeBehaviour::kHttp503);
  const BenchRun run = run_bench(workload, options(4));
  const BenchSummary summary = summarize_bench(workload, run, 4);
  ASSERT_EQ(summary.classes.size(), 2u);
  const ClassOutcomes& chat = summary.classes[0];
  const ClassOutcomes& document = summary.classes[1];
  EXPECT_EQ(chat.succeeded, count_class("chat"));
  EXPECT_EQ(chat.failed, 0u);
  EXPECT_EQ(document.failed, count_class("document"));
  EXPECT_EQ(document.failures_by_kind[static_cast<size_t>(FailureKind::kHttpStatus)],
            count_class("document"));
  EXPECT_NE(document.first_failure.find("HTTP 503: overloaded"), std::string::npos)
      << document.first_failure;
  EXPECT_EQ(summary.overall.sent, workload.requests.size());
  for (size_t i = 0; i < run.results.size(); ++i) {
    if (!run.results[i].ok()) {
      EXPECT_EQ(run.results[i].http_status, 503);
    }
    EXPECT_EQ(run.records[i].finished, run.results[i].ok());
  }
}

// Two conversations of three turns that wait for answers (wait_for_answer), answered by a server
// that says which ids it produced (5, 6, 5, 6).
core::Workload waiting_conversations() {
  return core::parse_workload(R"(
seed = 3
[arrival]
process = "fixed"
times = [0, 0]
[[classes]]
name = "talk"
share = 1
prompt = { dist = "fixed", value = 10 }
output = { dist = "fixed", value = 4 }
conversation = { turns = 3, gap = 0.01, wait_for_answer = true }
)",
                              "talks.toml");
}

// Each later turn is sent once the turn before has ended, and resends it with the answer the
// server gave.
TEST_F(BenchRunnerTest, AConversationThatWaitsSendsEachTurnAfterTheAnswerAndWithIt) {
  server.set_behaviour("talk", FakeBehaviour::kTwoTokensPerChunk);
  const core::Workload talks = waiting_conversations();
  ASSERT_EQ(talks.requests.size(), 6u);
  const BenchOptions o = options(4);
  const BenchRun run = run_bench(talks, o);
  for (const StreamResult& r : run.results) EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(run.unsent_turns, 0u);
  const std::vector<nlohmann::json> received = server.received();
  ASSERT_EQ(received.size(), 6u);
  // Each request's prompt as the server received it, and when it came in the server's order.
  std::map<size_t, std::pair<std::vector<int32_t>, size_t>> got;
  for (size_t k = 0; k < received.size(); ++k) {
    const std::vector<int32_t> prompt = received[k]["prompt"].get<std::vector<int32_t>>();
    for (size_t i = 0; i < talks.requests.size(); ++i) {
      const std::vector<int32_t> nominal =
          core::synthetic_prompt(talks.seed, talks.requests[i], o.token_ids);
      // The turn's own message ends its prompt whatever came before it.
      if (prompt.size() == nominal.size() &&
          std::equal(nominal.end() - 10, nominal.end(), prompt.end() - 10)) {
        got[i] = {prompt, k};
      }
    }
  }
  ASSERT_EQ(got.size(), 6u);
  const std::vector<int32_t> answer = {5, 6, 5, 6};
  for (size_t i = 0; i < talks.requests.size(); ++i) {
    const core::WorkloadRequest& r = talks.requests[i];
    if (r.turn == 0) continue;
    SCOPED_TRACE("request " + std::to_string(i));
    size_t before = talks.requests.size();
    for (size_t j = 0; j < talks.requests.size(); ++j) {
      if (talks.requests[j].conversation_id() == r.conversation_id() &&
          talks.requests[j].turn + 1 == r.turn) {
        before = j;
      }
    }
    ASSERT_LT(before, talks.requests.size());
    const std::vector<int32_t>& earlier = got[before].first;
    const std::vector<int32_t>& prompt = got[i].first;
    ASSERT_EQ(prompt.size(), earlier.size() + 4 + 10);
    EXPECT_TRUE(std::equal(earlier.begin(), earlier.end(), prompt.begin()));
    EXPECT_TRUE(std::equal(answer.begin(), answer.end(), prompt.begin() + earlier.size()));
    EXPECT_GT(got[i].second, got[before].second);
    EXPECT_GE(run.records[i].arrival, run.records[before].finish);
    EXPECT_EQ(run.records[i].prompt_tokens, prompt.size());
  }
}

// A server that returns no token ids (the plain stream) leaves the answers unknown: each of the 4
// answers that a next turn resends is counted, and its nominal stand-in goes instead.
TEST_F(BenchRunnerTest, AnswersWithoutIdsAreCountedAndStoodInFor) {
  const core::Workload talks = waiting_conversations();
  const BenchOptions o = options(4);
  const BenchRun run = run_bench(talks, o);
  for (const StreamResult& r : run.results) EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(run.answers_without_ids, 4u);
  // With stand-ins every prompt is the open loop's.
  std::vector<std::vector<int32_t>> sent, nominal;
  for (const nlohmann::json& body : server.received()) {
    sent.push_back(body["prompt"].get<std::vector<int32_t>>());
  }
  for (const core::WorkloadRequest& r : talks.requests) {
    nominal.push_back(core::synthetic_prompt(talks.seed, r, o.token_ids));
  }
  std::sort(sent.begin(), sent.end());
  std::sort(nominal.begin(), nominal.end());
  EXPECT_EQ(sent, nominal);
}

// A turn that fails ends its conversation: the turns after it never reach the server and fail as
// such, counted as not sent.
TEST_F(BenchRunnerTest, AFailedTurnEndsItsConversationAndTheRestAreNotSent) {
  server.set_behaviour("talk", FakeBehaviour::kHttp503);
  const core::Workload talks = waiting_conversations();
  const BenchRun run = run_bench(talks, options(4));
  EXPECT_EQ(server.received().size(), 2u);
  EXPECT_EQ(run.unsent_turns, 4u);
  for (size_t i = 0; i < talks.requests.size(); ++i) {
    const FailureKind expected =
        talks.requests[i].turn == 0 ? FailureKind::kHttpStatus : FailureKind::kEarlierTurnFailed;
    EXPECT_EQ(run.results[i].failure, expected) << i << ": " << run.results[i].message;
    EXPECT_FALSE(run.records[i].finished);
    // A turn never sent was never late.
    EXPECT_EQ(std::isnan(run.lateness[i]), talks.requests[i].turn > 0) << i;
  }
  const BenchSummary summary = summarize_bench(talks, run, 4);
  EXPECT_EQ(summary.overall.sent, 2u);
  EXPECT_EQ(summary.overall.failed, 6u);
  EXPECT_EQ(summary.overall.failures_by_kind[static_cast<size_t>(FailureKind::kEarlierTurnFailed)],
            4u);
}

// A stop that cuts turns in flight fails nothing after them: their conversations just end, and
// the interrupted run's report covers the two turns sent.
TEST_F(BenchRunnerTest, AStopEndsTheConversationsWithoutFailingTheirLaterTurns) {
  server.set_behaviour("talk", FakeBehaviour::kHold);
  const core::Workload talks = waiting_conversations();
  std::atomic<bool> stop{false};
  BenchOptions o = options(4);
  o.stop = &stop;
  BenchRun run;
  std::thread bench([&] { run = run_bench(talks, o); });
  ASSERT_TRUE(server.wait_until_held(2));
  stop = true;
  bench.join();
  server.release_held();
  EXPECT_TRUE(run.interrupted);
  EXPECT_EQ(run.requests_sent, 2u);
  EXPECT_EQ(run.unsent_turns, 0u);
  for (const StreamResult& r : run.results) {
    EXPECT_NE(r.failure, FailureKind::kEarlierTurnFailed) << r.message;
  }
  const core::Workload sent = keep_sent(talks, run);
  ASSERT_EQ(sent.requests.size(), 2u);
  for (const core::WorkloadRequest& r : sent.requests) EXPECT_EQ(r.turn, 0u);
  for (const StreamResult& r : run.results) EXPECT_EQ(r.failure, FailureKind::kInterrupted);
}

TEST_F(BenchRunnerTest, BrokenStreamsAreFailuresOfTheirKind) {
  server.set_behaviour("chat", FakeBehaviour::kCloseMidStream);
  server.set_behaviour("document", FakeBehaviour::kEndWithoutDone);
  const BenchRun run = run_bench(workload, options(4));
  const BenchSummary summary = summarize_bench(workload, run, 4);
  EXPECT_EQ(summary.classes[0].failures_by_kind[static_cast<size_t>(FailureKind::kTransport)],
            count_class("chat"));
  // Said in words: a dropped connection, not cpp-httplib's bare "Read".
  EXPECT_NE(summary.classes[0].first_failure.find(
                "the stream broke: the server closed the connection after 1 event"),
            std::string::npos)
      << summary.classes[0].first_failure;
  EXPECT_EQ(summary.classes[1].failures_by_kind[static_cast<size_t>(FailureKind::kCutShort)],
            count_class("document"));
  EXPECT_EQ(summary.overall.succeeded, 0u);
  // Failed streams' tokens are not output (vLLM's benchmark counts successful requests only).
  EXPECT_EQ(core::build_report(workload, run.records, 0, 0, run.wall_seconds).overall.output_tokens,
            0u);

  server.set_behaviour("chat", FakeBehaviour::kErrorEvent);
  server.set_behaviour("document", FakeBehaviour::kStream);
  const BenchSummary second = summarize_bench(workload, run_bench(workload, options(4)), 4);
  EXPECT_EQ(second.classes[0].failures_by_kind[static_cast<size_t>(FailureKind::kStreamError)],
            count_class("chat"));
  EXPECT_NE(second.classes[0].first_failure.find("engine failed"), std::string::npos);
  EXPECT_EQ(second.classes[1].succeeded, count_class("document"));
}

TEST_F(BenchRunnerTest, TokensOfMultiTokenChunksAreAllCounted) {
  server.set_behaviour("chat", FakeBehaviour::kTwoTokensPerChunk);
  const BenchRun run = run_bench(workload, options(4));
  for (size_t i = 0; i < run.records.size(); ++i) {
    ASSERT_TRUE(run.results[i].ok()) << run.results[i].message;
    EXPECT_EQ(run.records[i].output_tokens, workload.requests[i].output_tokens);
    EXPECT_EQ(run.records[i].token_times.size(), workload.requests[i].output_tokens);
  }
}

// A server whose usage does not say what it found cached: the records say 0 and the run says
// that nothing was reported (the report then prints null, not 0%).
TEST_F(BenchRunnerTest, AServerThatReportsNoCachedTokensIsToldApart) {
  server.set_behaviour("chat", FakeBehaviour::kTwoTokensPerChunk);
  server.set_behaviour("document", FakeBehaviour::kTwoTokensPerChunk);
  const BenchRun run = run_bench(workload, options(4));
  for (const core::RequestRecord& record : run.records) EXPECT_EQ(record.cached_tokens, 0u);
  EXPECT_FALSE(run.cached_tokens_reported);
}

TEST_F(BenchRunnerTest, ModelListAndApiKeyReachTheServer) {
  ServerEndpoint endpoint = parse_server_url(server.url() + "/v1");
  endpoint.api_key = "sk-test";
  const std::vector<ServedModel> models = list_models(endpoint);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].id, "tiny");
  EXPECT_EQ(models[0].vocab_size, 320u);
  EXPECT_EQ(models[0].max_model_len, 8192u);

  BenchOptions o = options(2);
  o.endpoint = endpoint;
  const core::Workload one = core::load_workload(kWorkload);
  run_bench(one, o);
  EXPECT_EQ(server.last_authorization(), "Bearer sk-test");
}

TEST_F(BenchRunnerTest, AModelListRefusedForItsKeySaysHowToGiveOne) {
  server.require_key("sk-right");
  ServerEndpoint endpoint = parse_server_url(server.url());
  const auto refusal = [&] {
    try {
      list_models(endpoint);
    } catch (const core::Error& e) {
      EXPECT_EQ(e.code(), HW_FAILED_PRECONDITION) << e.what();
      EXPECT_NE(std::string(e.what()).find("HTTP 401"), std::string::npos) << e.what();
      return std::string(e.what());
    }
    ADD_FAILURE() << "the model list was given without the key";
    return std::string();
  };
  EXPECT_NE(refusal().find("give it with --api-key-file"), std::string::npos);
  endpoint.api_key = "sk-wrong";
  EXPECT_NE(refusal().find("refused the key given with --api-key-file"), std::string::npos);
  endpoint.api_key = "sk-right";
  EXPECT_EQ(list_models(endpoint).size(), 1u);
}

TEST_F(BenchRunnerTest, AServerThatIsNotThereFailsEveryRequestAsTransport) {
  BenchOptions o = options(4);
  o.endpoint = parse_server_url("http://127.0.0.1:1");
  o.endpoint.connect_timeout_s = 2;
  const BenchRun run = run_bench(workload, o);
  const BenchSummary summary = summarize_bench(workload, run, 4);
  EXPECT_EQ(summary.overall.failures_by_kind[static_cast<size_t>(FailureKind::kTransport)],
            workload.requests.size());
  EXPECT_NE(summary.overall.first_failure.find("cannot connect to http://127.0.0.1:1"),
            std::string::npos)
      << summary.overall.first_failure;
}

// A server that ignores "stream": true answers with a JSON body: a bad answer that says so.
TEST_F(BenchRunnerTest, AnAnswerThatIsNotAnEventStreamIsNamedAsSuch) {
  server.set_behaviour("chat", FakeBehaviour::kJsonBody);
  const BenchSummary summary = summarize_bench(workload, run_bench(workload, options(4)), 4);
  EXPECT_EQ(summary.classes[0].failures_by_kind[static_cast<size_t>(FailureKind::kBadChunk)],
            count_class("chat"));
  EXPECT_NE(summary.classes[0].first_failure.find(
                "the answer is not an event stream (Content-Type application/json)"),
            std::string::npos)
      << summary.classes[0].first_failure;
}

}  // namespace
}  // namespace headway::serving::bench
