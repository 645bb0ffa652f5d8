#include "headway/serving/bench/bench_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "headway/serving/bench/completion_client.h"
#include "headway/serving/bench/open_loop_dispatcher.h"
#include "headway/serving/bench/run_clock.h"

namespace headway::serving::bench {

namespace {

// The senders' clients, so that a stop can shut their connections down from the watcher thread:
// a stream of a server that sends nothing would otherwise hold the run until --timeout.
class ClientRegistry {
 public:
  void add(CompletionClient* client) {
    std::lock_guard lock(mutex_);
    clients_.push_back(client);
  }
  void remove(CompletionClient* client) {
    std::lock_guard lock(mutex_);
    std::erase(clients_, client);
  }
  void abort_all() {
    std::lock_guard lock(mutex_);
    for (CompletionClient* client : clients_) client->abort();
  }

 private:
  std::mutex mutex_;
  std::vector<CompletionClient*> clients_;
};

class StreamingSender final : public RequestSender {
 public:
  StreamingSender(const core::Workload& workload, const BenchOptions& options,
                  const RunClock& clock, std::vector<StreamResult>& results,
                  ClientRegistry& registry)
      : workload_(workload),
        options_(options),
        clock_(clock),
        client_(options.endpoint, clock),
        results_(results),
        registry_(registry) {
    registry_.add(&client_);
  }
  ~StreamingSender() override { registry_.remove(&client_); }
  StreamingSender(const StreamingSender&) = delete;
  StreamingSender& operator=(const StreamingSender&) = delete;

  void send(size_t index) override {
    const core::WorkloadRequest& request = workload_.requests[index];
    if (stop_requested(options_.stop)) {
      // Handed over just before the stop: not sent, and said so.
      const double now = clock_.now();
      StreamMeasurement not_sent(now);
      not_sent.fail(FailureKind::kInterrupted, "bench was interrupted before it was sent", now);
      results_[index] = not_sent.finish(now);
      return;
    }
    // Built here rather than up front: a long trace's prompts would not fit in memory at once.
    const std::string body =
        completion_body(request, workload_.classes[request.class_index].name, options_.model,
                        core::synthetic_prompt(workload_.seed, request, options_.token_ids));
    if (options_.progress) ++options_.progress->sent;
    // Each index is written by exactly one sender; run_bench reads them after the join.
    results_[index] = client_.stream(body, request.output_tokens, options_.stop);
    if (options_.progress) {
      if (!results_[index].ok()) ++options_.progress->failed;
      ++options_.progress->finished;
    }
  }

 private:
  const core::Workload& workload_;
  const BenchOptions& options_;
  const RunClock& clock_;
  CompletionClient client_;
  std::vector<StreamResult>& results_;
  ClientRegistry& registry_;
};

}  // namespace

core::RequestRecord take_record(const core::WorkloadRequest& request, StreamResult& result) {
  core::RequestRecord record;
  record.id = request.id;
  record.class_index = request.class_index;
  record.prompt_tokens = request.prompt_tokens;
  record.output_tokens = result.output_tokens;
  record.arrival = result.sent;
  record.first_token = result.first_token;
  record.finish = result.finish;
  record.finished = result.ok();
  record.cached_tokens = result.usage_cached_tokens.value_or(0);
  record.token_times = std::move(result.token_times);
  return record;
}

BenchRun run_bench(const core::Workload& workload, const BenchOptions& options) {
  BenchRun run;
  run.results.resize(workload.requests.size());
  std::vector<double> arrivals;
  arrivals.reserve(workload.requests.size());
  for (const core::WorkloadRequest& r : workload.requests) arrivals.push_back(r.arrival);

  const RunClock clock;
  ClientRegistry registry;
  // Once stopped, shut every connection down, again every 50 ms until the run is over (a sender
  // may have picked its request just before the stop).
  std::atomic<bool> over{false};
  std::thread watcher;
  if (options.stop != nullptr) {
    watcher = std::thread([&] {
      while (!over.load()) {
        if (stop_requested(options.stop)) registry.abort_all();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  DispatchResult dispatched;
  try {
    dispatched = dispatch_open_loop(
        arrivals, options.max_concurrency, clock,
        [&]() -> std::unique_ptr<RequestSender> {
          return std::make_unique<StreamingSender>(workload, options, clock, run.results, registry);
        },
        {}, options.stop);
  } catch (...) {
    over = true;
    if (watcher.joinable()) watcher.join();
    throw;
  }
  over = true;
  if (watcher.joinable()) watcher.join();
  run.requests_sent = dispatched.sent;
  run.interrupted = stop_requested(options.stop);
  run.wall_seconds = clock.now();
  run.lateness = std::move(dispatched.lateness);
  run.sender_threads = dispatched.sender_threads;
  run.peak_in_flight = dispatched.peak_in_flight;
  run.records.reserve(workload.requests.size());
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    run.cached_tokens_reported |= run.results[i].usage_cached_tokens.has_value();
    run.records.push_back(take_record(workload.requests[i], run.results[i]));
  }
  return run;
}

}  // namespace headway::serving::bench
