#include <fmt/format.h>
#include <headway/core/cluster.h>
#include <headway/core/error.h>
#include <headway/core/simulator.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <limits>

namespace headway::core {

SimulationResult simulate(const DeploymentConfig& deployment, const Workload& workload,
                          const SimulationOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  Cluster cluster(deployment);
  if (!cluster.is_virtual()) {
    throw Error(
        fmt::format("{}: model '{}' runs on the wall clock; simulate needs a model that "
                    "reports step durations (e.g. plugin = \"sim\")",
                    deployment.file.string(), deployment.model.plugin->short_name()));
  }
  const size_t engines = cluster.size();
  SimulationResult result;
  result.records.resize(workload.requests.size());
  std::vector<bool> stalled(engines, false);

  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  size_t next = 0;
  double last_event = workload.requests.empty() ? 0.0 : workload.requests.front().arrival;
  std::string rejection_example;

  while (true) {
    size_t best = engines;
    double best_time = kInfinity;
    for (size_t e = 0; e < engines; ++e) {
      Engine& engine = cluster.engine(e);
      if (engine.has_work() && !stalled[e] && engine.clock().now() < best_time) {
        best = e;
        best_time = engine.clock().now();
      }
    }
    const double arrival_time =
        next < workload.requests.size() ? workload.requests[next].arrival : kInfinity;
    const double transfer_time = cluster.next_transfer_completion().value_or(kInfinity);
    // Ties: arrivals first, then KV arriving at decode engines, then steps.
    if (next < workload.requests.size() && arrival_time <= best_time &&
        arrival_time <= transfer_time) {
      // Records follow the workload's order, not its ids (a filtered workload keeps its ids).
      RequestRecord& record = result.records[next];
      const WorkloadRequest& w = workload.requests[next++];
      record.id = w.id;
      record.class_index = w.class_index;
      record.prompt_tokens = w.prompt_tokens;
      record.arrival = w.arrival;
      cluster.clock().advance_to(w.arrival);
      hw_route_request route{w.id, w.prompt_tokens, w.output_tokens, w.priority,
                             hw_str{workload.classes[w.class_index].name.data(),
                                    workload.classes[w.class_index].name.size()}};
      NewRequest request;
      request.id = w.id;
      request.class_index = w.class_index;
      request.prompt_tokens = w.prompt_tokens;
      request.max_output_tokens = w.output_tokens;
      request.priority = w.priority;
      request.arrival = w.arrival;
      request.sampling.seed = w.id;
      request.record = &record;
      try {
        // An idle engine has been waiting for this arrival: its clock jumps to it. Load-based
        // routers see every engine's state as of its own clock.
        for (size_t e = 0; e < engines; ++e) {
          if (!cluster.engine(e).has_work()) cluster.engine(e).clock().advance_to(w.arrival);
        }
        const uint32_t engine = cluster.submit(std::move(request), route);
        stalled[engine] = false;
      } catch (const Error& e) {
        // A request the deployment cannot take is reported, not fatal: it stays unfinished.
        ++result.rejected;
        record.finish = w.arrival;
        if (rejection_example.empty()) rejection_example = e.what();
      }
      last_event = std::max(last_event, w.arrival);
      continue;
    }
    if (transfer_time < kInfinity && transfer_time <= best_time) {
      cluster.complete_transfers(transfer_time);
      for (size_t e = 0; e < engines; ++e) stalled[e] = false;
      last_event = std::max(last_event, transfer_time);
      continue;
    }
    if (best == engines) break;
    Engine& engine = cluster.engine(best);
    if (!engine.step()) {
      stalled[best] = true;
      continue;
    }
    const StepDetail& step = engine.last_step();
    if (options.step_trace != nullptr) options.step_trace->write(static_cast<uint32_t>(best), step);
    result.step_records.push_back(StepRecord{
        step.step, static_cast<uint32_t>(best), step.start, step.duration, step.prefill_tokens,
        step.decode_tokens, static_cast<uint32_t>(step.slices.size()), step.kv_blocks_used,
        static_cast<uint32_t>(step.preempted.size())});
    const double now = engine.clock().now();
    // Prefills that finished here start moving; blocks freed here may let waiting transfers in.
    cluster.collect_prefilled(best, now);
    cluster.start_transfers(best, now);
    last_event = std::max(last_event, now);
  }

  if (cluster.transfers_waiting() > 0 || cluster.transfers_in_flight() > 0) {
    throw Error(fmt::format("{}: {} KV transfers never found room on their decode engine and {} "
                            "never completed",
                            deployment.file.string(), cluster.transfers_waiting(),
                            cluster.transfers_in_flight()),
                HW_INTERNAL);
  }
  for (size_t e = 0; e < engines; ++e) {
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
  result.kv_transfers = cluster.transfers_started();
  if (result.rejected > 0) {
    spdlog::warn("{} of {} requests were refused by the deployment, e.g.: {}", result.rejected,
                 workload.requests.size(), rejection_example);
  }
  const double first = workload.requests.empty() ? 0.0 : workload.requests.front().arrival;
  result.simulated_seconds = last_event - first;
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

}  // namespace headway::core
