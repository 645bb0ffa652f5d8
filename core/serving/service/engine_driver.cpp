#include "engine_driver.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <exception>

namespace headway::serving {
namespace {

Finish finish_of(core::FinishReason reason) {
  switch (reason) {
    case core::FinishReason::kLength:
      return Finish::kLength;
    case core::FinishReason::kStop:
      return Finish::kStop;
    case core::FinishReason::kAborted:
      return Finish::kAbort;
  }
  return Finish::kError;
}

}  // namespace

EngineDriver::EngineDriver(core::Engine& engine, EngineSeries metrics, FinishedSink& sink)
    : engine_(engine), metrics_(metrics), sink_(sink) {
  published_ = engine_.load();
  metrics_.alive.set(1);
}

EngineDriver::~EngineDriver() { stop(); }

void EngineDriver::start() {
  engine_.set_listener(this);
  thread_ = std::thread([this] { run(); });
}

void EngineDriver::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineDriver::enqueue_submit(core::NewRequest request,
                                  std::unique_ptr<InFlightRequest> state) {
  {
    std::lock_guard lock(mutex_);
    ++inbox_submits_;
    inbox_prompt_tokens_ += request.prompt.size();
    inbox_output_tokens_ += request.max_output_tokens;
    Command command;
    command.kind = Command::Kind::kSubmit;
    command.id = request.id;
    command.request = std::move(request);
    command.state = std::move(state);
    inbox_.push_back(std::move(command));
  }
  wake_.notify_one();
}

void EngineDriver::enqueue_abort(uint64_t id, bool stop_string) {
  {
    std::lock_guard lock(mutex_);
    Command command;
    command.kind = Command::Kind::kAbort;
    command.id = id;
    command.stop_string = stop_string;
    inbox_.push_back(std::move(command));
  }
  wake_.notify_one();
}

hw_engine_load EngineDriver::load() const {
  std::lock_guard lock(mutex_);
  hw_engine_load load = published_;
  // Requests routed here but not yet in the engine count as waiting, so that a burst of submits
  // spreads over the engines instead of all landing on the one that looked idle.
  load.waiting += inbox_submits_;
  load.queued_prefill_tokens += inbox_prompt_tokens_;
  load.outstanding_tokens += inbox_prompt_tokens_ + inbox_output_tokens_;
  load.alive = alive_ ? 1 : 0;
  return load;
}

uint32_t EngineDriver::waiting_including_inbox() const {
  std::lock_guard lock(mutex_);
  return published_.waiting + inbox_submits_;
}

bool EngineDriver::alive() const {
  std::lock_guard lock(mutex_);
  return alive_;
}

void EngineDriver::run() {
  bool stop = false;
  while (!stop) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || runnable_; });
      applying_.swap(inbox_);
      stop = stopping_;
    }
    for (Command& command : applying_) {
      if (command.kind == Command::Kind::kSubmit) {
        ++applied_submits_;
        applied_prompt_tokens_ += command.request.prompt.size();
        applied_output_tokens_ += command.request.max_output_tokens;
      }
      apply(command);
    }
    applying_.clear();
    if (stop) {
      // Shutting down: every request still here ends now, with its KV blocks freed.
      std::vector<uint64_t> ids;
      ids.reserve(requests_.size());
      for (const auto& [id, request] : requests_) ids.push_back(id);
      // (A failed engine has ended its requests already.)
      for (uint64_t id : ids) engine_.abort(id);
    } else {
      step_once();
    }
    publish();
  }
}

void EngineDriver::apply(Command& command) {
  if (command.kind == Command::Kind::kAbort) {
    auto it = requests_.find(command.id);
    if (it == requests_.end()) return;  // finished meanwhile
    it->second->ended_by_stop_string = it->second->ended_by_stop_string || command.stop_string;
    if (engine_ok_) {
      engine_.abort(command.id);  // on_finished() ends the stream
    }
    return;
  }
  InFlightRequest& state = *command.state;
  const uint64_t id = command.id;
  if (!engine_ok_) {
    end_request(
        state, Finish::kError, engine_.clock().now(),
        fmt::format("engine{} has failed and serves no more requests", engine_.config().index));
    finished_ids_.push_back(state.id);
    return;
  }
  state.record.arrival = command.request.arrival;
  command.request.record = &state.record;
  auto [slot, inserted] = requests_.emplace(id, std::move(command.state));
  try {
    engine_.add_request(std::move(command.request));
  } catch (const std::exception& e) {
    // Refused by the engine (its queue filled up between routing and now, or a limit the service
    // does not know of): the client learns why on its stream.
    end_request(*slot->second, Finish::kError, engine_.clock().now(), e.what());
    finished_ids_.push_back(slot->second->id);
    requests_.erase(slot);
    return;
  }
  (void)inserted;
  slot->second->series.prompt_tokens.add(slot->second->stream->prompt_tokens());
}

void EngineDriver::step_once() {
  runnable_ = false;
  if (!engine_ok_ || !engine_.has_work()) return;
  try {
    // No lock is held here: frontends keep queueing into the inbox during the forward pass.
    runnable_ = engine_.step();
  } catch (const std::exception& e) {
    fail(e.what());
    return;
  }
  // A step that planned nothing leaves the engine as it was: wait for the next command instead of
  // spinning (the simulator treats it as a stuck scheduler; here new work may unstick it).
  if (!runnable_) return;
  const core::StepDetail& step = engine_.last_step();
  if (step.prefill_tokens > 0) metrics_.prefill_tokens_per_step.observe(step.prefill_tokens);
  if (step.decode_tokens > 0) metrics_.decode_tokens_per_step.observe(step.decode_tokens);
  if (!step.preempted.empty()) metrics_.preemptions.add(static_cast<double>(step.preempted.size()));
}

void EngineDriver::publish() {
  hw_engine_load load = engine_.load();
  if (!engine_ok_) load.alive = 0;
  metrics_.running.set(load.running);
  metrics_.waiting.set(load.waiting);
  metrics_.kv_usage.set(load.kv_blocks_total == 0 ? 0.0
                                                  : 1.0 - static_cast<double>(load.kv_blocks_free) /
                                                              load.kv_blocks_total);
  {
    std::lock_guard lock(mutex_);
    published_ = load;
    alive_ = engine_ok_;
    // The applied submits are in `load` now: stop counting them as still in the inbox (in the same
    // critical section, so that no reader sees them in neither or in both).
    inbox_submits_ -= applied_submits_;
    inbox_prompt_tokens_ -= applied_prompt_tokens_;
    inbox_output_tokens_ -= applied_output_tokens_;
  }
  applied_submits_ = 0;
  applied_prompt_tokens_ = 0;
  applied_output_tokens_ = 0;
  // Forgotten only after the load that reflects their finish is visible (see in_flight()).
  if (!finished_ids_.empty()) {
    sink_.forget(finished_ids_);
    finished_ids_.clear();
  }
  for (PendingFinish& f : finishing_) f.stream->finish(f.reason, f.timings, std::move(f.error));
  finishing_.clear();
}

void EngineDriver::fail(const std::string& why) {
  const std::string message =
      fmt::format("engine{} failed and was taken out of service: {}", engine_.config().index, why);
  spdlog::error("{}", message);
  engine_ok_ = false;
  metrics_.alive.set(0);
  const double now = engine_.clock().now();
  for (auto& [id, request] : requests_) {
    end_request(*request, Finish::kError, now, message);
    finished_ids_.push_back(request->id);
  }
  requests_.clear();
}

void EngineDriver::end_request(InFlightRequest& request, Finish reason, double time,
                               std::string error) {
  const core::RequestRecord& r = request.record;
  Timings timings;
  const double arrival = std::isnan(r.arrival) ? time : r.arrival;
  timings.e2e_seconds = time - arrival;
  timings.queue_seconds = std::isnan(r.scheduled) ? timings.e2e_seconds : r.scheduled - arrival;
  timings.ttft_seconds = std::isnan(r.first_token) ? 0.0 : r.first_token - arrival;
  timings.kv_transfer_seconds = r.kv_transfer_seconds;
  const Finish counted = request.ended_by_stop_string ? Finish::kStop : reason;
  request.series.finished_with(counted).add();
  request.series.e2e_latency.observe(timings.e2e_seconds);
  request.series.queue_time.observe(timings.queue_seconds);
  if (r.kv_transfer_seconds > 0.0) {
    metrics_.kv_transfers.add();
    metrics_.kv_transfer_seconds.observe(r.kv_transfer_seconds);
  }
  // Delivered in publish(), after the id is forgotten (see finishing_).
  finishing_.push_back(PendingFinish{request.stream, reason, timings, std::move(error)});
}

void EngineDriver::on_token(uint64_t request_id, int32_t token, double time) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  InFlightRequest& request = *it->second;
  if (request.record.output_tokens <= 1) {
    // The engine counts the token in the record before calling back.
    request.series.time_to_first_token.observe(time - request.record.arrival);
  } else {
    request.series.inter_token_latency.observe(time - request.last_token_time);
  }
  request.last_token_time = time;
  request.series.generation_tokens.add();
  request.stream->push_tokens(std::span<const int32_t>(&token, 1));
}

void EngineDriver::on_finished(uint64_t request_id, core::FinishReason reason, double time) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  end_request(*it->second, finish_of(reason), time, {});
  finished_ids_.push_back(it->second->id);
  requests_.erase(it);
}

}  // namespace headway::serving
