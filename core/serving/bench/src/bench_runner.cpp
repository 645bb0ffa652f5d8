#include "headway/serving/bench/bench_runner.h"

#include <fmt/format.h>
#include <headway/core/arrival_schedule.h>
#include <headway/core/synthetic_prompt.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
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

// The workload's schedule (core/arrival_schedule.h) for the dispatcher and the senders: fixed
// arrivals, and the later turns of conversations that wait for answers once the turn before ends.
class ConversationQueue final : public SendQueue {
 public:
  ConversationQueue(const core::Workload& workload, core::TokenIdRange ids)
      : workload_(workload), ids_(ids), schedule_(workload, ids) {}

  bool closes_loops() const { return schedule_.closes_loops(); }

  Look take_due(double now) override {
    std::lock_guard lock(mutex_);
    Look look;
    look.exhausted = schedule_.exhausted();
    const std::optional<core::ArrivalSchedule::Due> due = schedule_.next();
    if (!due) return look;
    if (due->time <= now) {
      schedule_.take();
      look.taken = Due{due->index, due->time};
    } else {
      look.next_time = due->time;
    }
    return look;
  }
  void wait_until(std::chrono::steady_clock::time_point deadline) override {
    std::unique_lock lock(mutex_);
    changed_.wait_until(lock, deadline, [&] { return std::exchange(changed_flag_, false); });
  }

  // The prompt of request `index`, on its sender's thread.
  std::vector<int32_t> prompt(size_t index) {
    // Without waiting conversations every prompt is a pure function of the request.
    if (!schedule_.closes_loops()) {
      return core::synthetic_prompt(workload_.seed, workload_.requests[index], ids_);
    }
    std::lock_guard lock(mutex_);
    return schedule_.prompt(index);
  }
  // After the run (no sender left).
  bool was_dropped(size_t index) const { return schedule_.was_dropped(index); }
  size_t stand_in_answers() const { return schedule_.stand_in_answers(); }

  // Request `index` is over (sent or not): its conversation's next turn may go.
  void ended(size_t index, const StreamResult& result) {
    if (!schedule_.closes_loops()) return;
    {
      std::lock_guard lock(mutex_);
      // A stream the stop cut failed for no fault of the server: its conversation just ends.
      if (result.failure == FailureKind::kInterrupted) {
        schedule_.cut(index);
      } else {
        schedule_.ended(index, result.finish, result.ok(), result.token_ids);
      }
      changed_flag_ = true;
    }
    changed_.notify_all();
  }

 private:
  const core::Workload& workload_;
  core::TokenIdRange ids_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool changed_flag_ = false;
  core::ArrivalSchedule schedule_;
};

class StreamingSender final : public RequestSender {
 public:
  StreamingSender(const core::Workload& workload, const BenchOptions& options,
                  const RunClock& clock, std::vector<StreamResult>& results,
                  ClientRegistry& registry, ConversationQueue& queue)
      : workload_(workload),
        options_(options),
        clock_(clock),
        client_(options.endpoint, clock),
        results_(results),
        registry_(registry),
        queue_(queue) {
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
      queue_.ended(index, results_[index]);
      return;
    }
    // Built here rather than up front: a long trace's prompts would not fit in memory at once.
    const std::vector<int32_t> prompt = queue_.prompt(index);
    const std::string body = completion_body(request, workload_.classes[request.class_index].name,
                                             options_.model, prompt);
    if (options_.progress) ++options_.progress->sent;
    // Each index is written by exactly one sender; run_bench reads them after the join. A turn
    // whose conversation goes on keeps its answer's ids, which the next turn resends.
    results_[index] =
        client_.stream(body, request.output_tokens, options_.stop, queue_.closes_loops());
    results_[index].prompt_tokens = static_cast<uint32_t>(prompt.size());
    queue_.ended(index, results_[index]);
    // Kept only as long as the next turn needs them.
    results_[index].token_ids = {};
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
  ConversationQueue& queue_;
};

}  // namespace

core::RequestRecord take_record(const core::WorkloadRequest& request, StreamResult& result) {
  core::RequestRecord record;
  record.id = request.id;
  record.class_index = request.class_index;
  // What was sent, which a conversation's turn that carries its previous answer may make differ.
  record.prompt_tokens = result.prompt_tokens != 0 ? result.prompt_tokens : request.prompt_tokens;
  record.output_tokens = result.output_tokens;
  // A turn never sent has no arrival.
  record.arrival = result.failure == FailureKind::kEarlierTurnFailed ? core::kNever : result.sent;
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
  ConversationQueue queue(workload, options.token_ids);

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
    dispatched = dispatch(
        queue, workload.requests.size(), options.max_concurrency, clock,
        [&]() -> std::unique_ptr<RequestSender> {
          return std::make_unique<StreamingSender>(workload, options, clock, run.results, registry,
                                                   queue);
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
  run.sent = std::move(dispatched.handed);
  run.answers_without_ids = queue.stand_in_answers();
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    if (run.sent[i] == 0 && queue.was_dropped(i)) {
      // A turn after a failed one in a conversation that waits for answers (interrupted or not,
      // the failure before the stop dropped it): it fails, saying why.
      const core::WorkloadRequest& turn = workload.requests[i];
      run.results[i].failure = FailureKind::kEarlierTurnFailed;
      run.results[i].first_token = core::kNever;
      run.results[i].finish = core::kNever;
      run.results[i].message =
          fmt::format("turn {} of conversation {} was never sent: an earlier turn of it failed",
                      turn.turn + 1, turn.conversation_id());
      ++run.unsent_turns;
    }
  }
  run.records.reserve(workload.requests.size());
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    run.cached_tokens_reported |= run.results[i].usage_cached_tokens.has_value();
    run.records.push_back(take_record(workload.requests[i], run.results[i]));
  }
  return run;
}

core::Workload keep_sent(const core::Workload& workload, BenchRun& run) {
  core::Workload out;
  out.source = workload.source;
  out.seed = workload.seed;
  out.classes = workload.classes;
  size_t kept = 0;
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    const bool dropped =
        i < run.results.size() && run.results[i].failure == FailureKind::kEarlierTurnFailed;
    if (!dropped && (i >= run.sent.size() || run.sent[i] == 0)) continue;
    out.requests.push_back(workload.requests[i]);
    if (kept != i) {
      run.records[kept] = std::move(run.records[i]);
      run.results[kept] = std::move(run.results[i]);
      run.lateness[kept] = run.lateness[i];
    }
    ++kept;
  }
  run.records.resize(kept);
  run.results.resize(kept);
  run.lateness.resize(kept);
  run.sent.resize(kept);
  for (size_t i = 0; i < kept; ++i) {
    run.sent[i] = run.results[i].failure == FailureKind::kEarlierTurnFailed ? 0 : 1;
  }
  return out;
}

}  // namespace headway::serving::bench
