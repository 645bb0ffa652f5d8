#include <fmt/format.h>
#include <headway/core/arrival_schedule.h>
#include <headway/core/cluster.h>
#include <headway/core/error.h>
#include <headway/core/long_call_watch.h>
#include <headway/core/queue_growth.h>
#include <headway/core/simulator.h>
#include <headway/core/synthetic_prompt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <thread>

namespace headway::core {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The ids of synthetic prompts for the deployment's model.
TokenIdRange token_ids_of(Cluster& cluster) {
  const hw_model_info& info = cluster.engine(0).model_info();
  const int32_t end =
      info.vocab > 0 && info.vocab <= INT32_MAX ? static_cast<int32_t>(info.vocab) : INT32_MAX;
  return TokenIdRange{0, end};
}

// Which requests of a run ended, as the engines say (set on every engine only while the workload
// has turns that wait for answers); the run's loop hands them to the schedule between events.
class EndedRequests final : public EngineListener {
 public:
  EndedRequests(Cluster& cluster, bool listen) : cluster_(cluster), listening_(listen) {
    if (!listening_) return;
    for (size_t e = 0; e < cluster_.size(); ++e) cluster_.engine(e).set_listener(this);
  }
  ~EndedRequests() override {
    if (!listening_) return;
    for (size_t e = 0; e < cluster_.size(); ++e) cluster_.engine(e).set_listener(nullptr);
  }
  EndedRequests(const EndedRequests&) = delete;
  EndedRequests& operator=(const EndedRequests&) = delete;

  void on_token(uint64_t, int32_t, double, const SampledLogprobs*) override {}
  void on_finished(uint64_t request_id, FinishReason, double) override {
    ended_.push_back(request_id);
  }

  // Tells `schedule` of the waiting conversations' turns that ended since the last call; `offset`
  // turns the cluster's clock into the workload's.
  void hand_over(ArrivalSchedule& schedule, const SimulationResult& result, double offset) {
    for (const uint64_t id : ended_) {
      const std::optional<size_t> index = schedule.index_of(id);
      if (!index) continue;
      const RequestRecord& record = result.records[*index];
      // A prefill engine lets go of a request whose decode goes on elsewhere: not its end.
      if (std::isnan(record.finish)) continue;
      schedule.ended(*index, record.finish + offset, record.finished, record.token_ids);
    }
    ended_.clear();
  }

 private:
  Cluster& cluster_;
  bool listening_;
  std::vector<uint64_t> ended_;
};

// Routes workload request `index` into the cluster at time `at` (its arrival on the run's clock).
// A request the deployment cannot take is reported, not fatal: it stays unfinished.
// Returns the engine it went to, or -1.
int64_t submit(Cluster& cluster, const Workload& workload, ArrivalSchedule& schedule, size_t index,
               RequestRecord& record, double at, double offset, SimulationResult& result,
               std::string& rejection_example, LongCallWatch* watch) {
  const WorkloadRequest& w = workload.requests[index];
  // Its id, class and nominal prompt length are the record's from the start (simulate()).
  record.arrival = at;
  const std::string& class_name = workload.classes[w.class_index].name;
  NewRequest request;
  request.id = w.id;
  request.class_index = w.class_index;
  request.prompt_tokens = w.prompt_tokens;
  const hw_model_info& info = cluster.engine(0).model_info();
  // Ids for models that read them, and for a shared beginning or a conversation's turns, which the
  // engines' prefix caches recognise by their ids (a simulated model ignores them).
  if (info.needs_token_ids || w.shared_prefix_tokens > 0 ||
      workload.classes[w.class_index].turns > 1) {
    request.prompt = schedule.prompt(index);
    // A turn that carries its previous answer as produced may differ from its nominal length.
    request.prompt_tokens = static_cast<uint32_t>(request.prompt.size());
    record.prompt_tokens = request.prompt_tokens;
  }
  hw_route_request route{w.id, request.prompt_tokens, w.asked_tokens(), w.priority,
                         hw_str{class_name.data(), class_name.size()}};
  // The engines are told what the client asks for; the answer ends by itself at its length.
  request.max_output_tokens = w.asked_tokens();
  if (w.asked_tokens() > w.output_tokens) request.ends_after_outputs = w.output_tokens;
  request.priority = w.priority;
  request.arrival = at;
  request.sampling.seed = w.id;
  // Workloads fix output lengths; a real model must not stop early at its end-of-text token.
  request.sampling.ignore_eos = true;
  request.record = &record;
  try {
    const WatchedCall routing(watch, LongCallWatch::Call::kRoute);
    return cluster.submit(std::move(request), route);
  } catch (const Error& e) {
    ++result.rejected;
    record.finish = at;
    if (rejection_example.empty()) rejection_example = e.what();
    schedule.ended(index, at + offset, false, {});
    return -1;
  }
}

StepRecord step_record(size_t engine, const StepDetail& step) {
  return StepRecord{step.step,
                    static_cast<uint32_t>(engine),
                    step.start,
                    step.duration,
                    step.prefill_tokens,
                    step.decode_tokens,
                    static_cast<uint32_t>(step.slices.size()),
                    step.kv_blocks_used,
                    static_cast<uint32_t>(step.preempted.size())};
}

// After a step of engine e: trace it, and move the KV of prefills that finished there.
void after_step(Cluster& cluster, size_t e, const SimulationOptions& options,
                SimulationResult& result, LongCallWatch* watch) {
  Engine& engine = cluster.engine(e);
  const StepDetail& step = engine.last_step();
  if (options.step_trace != nullptr) options.step_trace->write(static_cast<uint32_t>(e), step);
  result.step_records.push_back(step_record(e, step));
  const double now = engine.clock().now();
  // Prefills that finished here start moving; blocks freed here may let waiting transfers in.
  const WatchedCall starting(watch, LongCallWatch::Call::kTransport);
  cluster.collect_prefilled(e, now);
  cluster.start_transfers(e, now);
}

// Each request's times in the order its life has them: arrival, admission, first token, each later
// token, end. An engine whose clock falls behind the events that drive it (a stalled engine that
// stepped again from its last step, before helper-180's fix) breaks this order, and every figure
// of the run is wrong with it: the run stops with an internal error rather than report them.
void check_time_order(const std::string& deployment, const SimulationResult& result) {
  const auto out_of_order = [&](const RequestRecord& r, const char* earlier, double e,
                                const char* later, double l) {
    return Error(fmt::format("{}: request {}: {} at {:.6f} s comes after {} at {:.6f} s; the "
                             "simulation's clocks went out of order (a simulator fault)",
                             deployment, r.id, earlier, e, later, l),
                 HW_INTERNAL);
  };
  for (const RequestRecord& r : result.records) {
    // NaN (never reached) compares false and passes.
    if (r.scheduled < r.arrival) {
      throw out_of_order(r, "arrival", r.arrival, "admission", r.scheduled);
    }
    if (r.first_token < r.scheduled) {
      throw out_of_order(r, "admission", r.scheduled, "first token", r.first_token);
    }
    for (size_t i = 1; i < r.token_times.size(); ++i) {
      if (r.token_times[i] < r.token_times[i - 1]) {
        throw out_of_order(r, "a token", r.token_times[i - 1], "the next", r.token_times[i]);
      }
    }
    if (!r.token_times.empty() && r.finish < r.token_times.back()) {
      throw out_of_order(r, "its last token", r.token_times.back(), "its end", r.finish);
    }
  }
}

// The discrete-event loop of the virtual clock, whose times are the workload's. Returns the span
// from the first arrival.
double run_virtual(Cluster& cluster, const Workload& workload, ArrivalSchedule& schedule,
                   const SimulationOptions& options, SimulationResult& result,
                   std::string& rejection_example, LongCallWatch* watch) {
  const size_t engines = cluster.size();
  std::vector<bool> stalled(engines, false);
  EndedRequests ended(cluster, schedule.closes_loops());
  const double first = workload.requests.empty() ? 0.0 : workload.requests.front().arrival;
  double last_event = first;
  while (true) {
    ended.hand_over(schedule, result, 0.0);
    size_t best = engines;
    double best_time = kInfinity;
    for (size_t e = 0; e < engines; ++e) {
      Engine& engine = cluster.engine(e);
      if (engine.has_work() && !stalled[e] && engine.clock().now() < best_time) {
        best = e;
        best_time = engine.clock().now();
      }
    }
    const std::optional<ArrivalSchedule::Due> due = schedule.next();
    const double arrival_time = due ? due->time : kInfinity;
    const double transfer_time = cluster.next_transfer_completion().value_or(kInfinity);
    // Ties: arrivals first, then KV arriving at decode engines, then steps.
    if (due && arrival_time <= best_time && arrival_time <= transfer_time) {
      schedule.take();
      cluster.clock().advance_to(arrival_time);
      // Idle and stalled engines have been waiting for this arrival: their clocks jump to it, so
      // that load-based routers see every engine as of now, and an engine this arrival unstalls
      // does not admit it before it came.
      for (size_t e = 0; e < engines; ++e) {
        if (!cluster.engine(e).has_work() || stalled[e]) {
          cluster.engine(e).clock().advance_to(arrival_time);
        }
      }
      // Records follow the workload's order, not its ids (a filtered workload keeps its ids).
      const int64_t engine =
          submit(cluster, workload, schedule, due->index, result.records[due->index], arrival_time,
                 0.0, result, rejection_example, watch);
      if (engine >= 0) stalled[static_cast<size_t>(engine)] = false;
      last_event = std::max(last_event, arrival_time);
      continue;
    }
    if (transfer_time < kInfinity && transfer_time <= best_time) {
      // A stalled engine could do nothing until now: the blocks this transfer frees on its
      // source, or the KV it brings to its destination, are there from its end, not from the end
      // of the engine's last step.
      for (size_t e = 0; e < engines; ++e) {
        if (stalled[e]) cluster.engine(e).clock().advance_to(transfer_time);
      }
      {
        const WatchedCall polling(watch, LongCallWatch::Call::kTransport);
        cluster.complete_transfers(transfer_time);
      }
      for (size_t e = 0; e < engines; ++e) stalled[e] = false;
      last_event = std::max(last_event, transfer_time);
      continue;
    }
    if (best == engines) break;
    bool stepped = false;
    {
      const WatchedCall stepping(watch, LongCallWatch::Call::kStep, static_cast<uint32_t>(best));
      stepped = cluster.engine(best).step();
    }
    if (!stepped) {
      stalled[best] = true;
      continue;
    }
    after_step(cluster, best, options, result, watch);
    last_event = std::max(last_event, cluster.engine(best).clock().now());
  }
  return last_event - first;
}

// The same workload against a real model: arrivals are released on the wall clock and the engines
// are stepped in turn on this thread (a serving process gives each engine a thread of its own).
double run_wall(Cluster& cluster, const Workload& workload, ArrivalSchedule& schedule,
                const SimulationOptions& options, SimulationResult& result,
                std::string& rejection_example, LongCallWatch* watch) {
  const size_t engines = cluster.size();
  const double origin = cluster.clock().now();
  const double first = workload.requests.empty() ? 0.0 : workload.requests.front().arrival;
  // The cluster's clock minus the workload's.
  const double shift = origin - first;
  EndedRequests ended(cluster, schedule.closes_loops());
  while (true) {
    ended.hand_over(schedule, result, -shift);
    const double now = cluster.clock().now();
    for (std::optional<ArrivalSchedule::Due> due = schedule.next(); due && due->time + shift <= now;
         due = schedule.next()) {
      schedule.take();
      submit(cluster, workload, schedule, due->index, result.records[due->index], due->time + shift,
             -shift, result, rejection_example, watch);
    }
    bool ran = false;
    for (size_t e = 0; e < engines; ++e) {
      if (!cluster.engine(e).has_work()) continue;
      bool stepped = false;
      {
        const WatchedCall stepping(watch, LongCallWatch::Call::kStep, static_cast<uint32_t>(e));
        stepped = cluster.engine(e).step();
      }
      if (stepped) {
        after_step(cluster, e, options, result, watch);
        ran = true;
      }
    }
    // A transfer completed just now gives its decode engine work that no engine has run yet: one
    // more pass (an engine with work whose step() plans nothing still ends the run, as a stall).
    size_t completed = 0;
    {
      const WatchedCall polling(watch, LongCallWatch::Call::kTransport);
      completed = cluster.complete_transfers(cluster.clock().now());
    }
    if (ran || completed > 0) continue;
    const bool transfers = cluster.transfers_in_flight() > 0 || cluster.transfers_waiting() > 0;
    ended.hand_over(schedule, result, -shift);
    const std::optional<ArrivalSchedule::Due> due = schedule.next();
    if (!due && !transfers) break;
    // Idle: sleep until the next arrival (or briefly, while a transfer is in flight).
    const double wait = transfers || !due ? 0.0005 : due->time + shift - now;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::clamp(wait, 0.0, 0.05)));
  }
  return cluster.clock().now() - origin;
}

}  // namespace

SimulationResult simulate(const DeploymentConfig& deployment, const Workload& workload,
                          const SimulationOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  Cluster cluster(deployment);
  SimulationResult result;
  result.records.resize(workload.requests.size());
  // Whose each record is, also for a turn that is never sent (it counts, unfinished, in its class).
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    RequestRecord& record = result.records[i];
    record.id = workload.requests[i].id;
    record.class_index = workload.requests[i].class_index;
    record.prompt_tokens = workload.requests[i].prompt_tokens;
  }
  std::string rejection_example;
  std::optional<LongCallWatch> watch;
  if (options.long_call_warning_seconds > 0) {
    watch.emplace(deployment.name + options.run_label, options.long_call_warning_seconds);
  }
  LongCallWatch* const watching = watch ? &*watch : nullptr;
  if (options.step_trace != nullptr) {
    for (size_t e = 0; e < cluster.size(); ++e) {
      options.step_trace->describe_engine(static_cast<uint32_t>(e), cluster.engine(e));
    }
  }
  ArrivalSchedule schedule(workload, token_ids_of(cluster));
  result.simulated_seconds =
      cluster.is_virtual()
          ? run_virtual(cluster, workload, schedule, options, result, rejection_example, watching)
          : run_wall(cluster, workload, schedule, options, result, rejection_example, watching);
  // Turns that waited for an answer which never came (their records stay unfinished).
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    if (!schedule.taken(i)) ++result.unsent_turns;
  }

  if (cluster.transfers_waiting() > 0 || cluster.transfers_in_flight() > 0) {
    // In flight at the end: the transport's poll() still answered PENDING when nothing else was
    // left to run (a real transfer that never ended; a simulated one answers within 2 s of its
    // start or stops the run sooner, Cluster::start_transfers).
    const std::string pending =
        cluster.transfers_in_flight() == 0
            ? std::string()
            : fmt::format(
                  " (KV transport '{}': poll() still answered PENDING when nothing else "
                  "was left to run)",
                  cluster.transport()->name());
    throw Error(fmt::format("{}: {} KV transfers never found room on their decode engine and {} "
                            "never completed{}",
                            deployment.file.string(), cluster.transfers_waiting(),
                            cluster.transfers_in_flight(), pending),
                HW_INTERNAL);
  }
  for (size_t e = 0; e < cluster.size(); ++e) {
    Engine& engine = cluster.engine(e);
    if (engine.has_work()) {
      throw Error(
          fmt::format("{}: engine{} stopped making progress with {} running and {} "
                      "waiting requests (its scheduler planned nothing it could run)",
                      deployment.file.string(), e, engine.running_size(), engine.waiting_size()),
          HW_INTERNAL);
    }
    result.engines.push_back(engine.counters());
    result.kv_blocks_total.push_back(engine.kv().total());
    result.steps += engine.counters().steps;
    result.preemptions += engine.counters().preemptions;
  }
  check_time_order(deployment.file.string(), result);
  result.kv_transfers = cluster.transfers_started();
  result.plugin_metrics = collect_plugin_metrics(cluster);
  if (result.rejected > 0) {
    spdlog::warn("{}{}: {} of {} requests were refused by the deployment, e.g.: {}",
                 deployment.name, options.run_label, result.rejected, workload.requests.size(),
                 rejection_example);
  }
  if (options.warn_of_grown_queue) {
    if (const std::optional<QueueGrowth> grown = grown_queue(result.records)) {
      spdlog::warn(
          "{}{}: overloaded: its queue grew through the run ({} requests waited for their "
          "first step when the last one arrived, {:.0f} s of arrivals, against {} a quarter of "
          "the way in), so its latency percentiles grow with the run's length; compare "
          "deployments at a rate each serves (--rate-scale, --find-capacity)",
          deployment.name, options.run_label, grown->waiting_at_end, grown->end_backlog_s,
          grown->waiting_at_quarter);
    }
  }
  if (result.unsent_turns > 0) {
    spdlog::warn(
        "{}{}: {} conversation turns were never sent: a turn before them got no answer "
        "(refused or aborted), and a conversation that waits for answers ends there",
        deployment.name, options.run_label, result.unsent_turns);
  }
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

}  // namespace headway::core
