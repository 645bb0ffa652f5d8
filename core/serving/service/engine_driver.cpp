#include "engine_driver.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <exception>
#include <numeric>
#include <optional>
#include <thread>

#include "held_kv.h"

namespace headway::serving {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What a hand-off adds to an engine's outstanding tokens: those it has left to generate (its KV
// comes computed).
uint64_t tokens_left(const Handoff& handoff) {
  const core::IncomingTransfer& request = handoff.request;
  return request.max_output_tokens > request.output_tokens
             ? request.max_output_tokens - request.output_tokens
             : 0;
}

// Where a hand-off's KV comes from, for the log.
std::string source_of(const Handoff& handoff) {
  return handoff.staged ? "the stage " + handoff.staged->shm_name
                        : fmt::format("engine{}", handoff.source_engine);
}

// Its blocks here are reserved: the KV's wait for room ends, and its copy may begin (a request
// refused room is ended, and one whose copy cannot start is prefilled here; neither counts as a
// transfer, and end_request reports no wait for them).
void record_wait(Handoff& handoff, double now) {
  handoff.state->record.kv_wait_seconds = std::max(0.0, now - handoff.ready);
}

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

template <class WriteTrace>
void EngineDriver::trace(WriteTrace&& write) {
  if (step_trace_ == nullptr) return;
  try {
    write();
  } catch (const std::exception& e) {
    spdlog::error("engine{}: {}; no more steps are traced, of any engine", engine_.config().index,
                  e.what());
    step_trace_ = nullptr;
  }
}

EngineDriver::EngineDriver(core::Engine& engine, EngineSeries metrics, FinishedSink& sink,
                           KvHandoff* handoff, std::shared_ptr<core::StepTraceWriter> step_trace)
    : engine_(engine),
      metrics_(metrics),
      sink_(sink),
      handoff_(handoff),
      step_trace_(std::move(step_trace)) {
  published_ = engine_.load();
  if (engine_.keeps_kv_events()) {
    // As long as the engine's own log: a step never logs more than it holds.
    const size_t capacity = 4 * size_t{published_.kv_blocks_total} + 64;
    published_events_ = std::make_unique<core::KvEventLog>(capacity);
    step_events_.reserve(capacity);
  }
  metrics_.alive.set(1);
  trace([&] { step_trace_->describe_engine(engine_.config().index, engine_); });
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

void EngineDriver::push(Command command) {
  {
    std::lock_guard lock(mutex_);
    inbox_.push_back(std::move(command));
  }
  wake_.notify_one();
}

void EngineDriver::enqueue_abort(uint64_t id, AbortCause cause) {
  Command command;
  command.kind = Command::Kind::kAbort;
  command.id = id;
  command.abort_cause = cause;
  push(std::move(command));
}

void EngineDriver::enqueue_incoming(Handoff handoff) {
  std::optional<Handoff> refused;
  {
    std::lock_guard lock(mutex_);
    if (!exited_) {  // checked and queued in one critical section: run() swaps exited_ and inbox
      ++inbox_handoffs_;
      inbox_handoff_tokens_ += tokens_left(handoff);
      // Counted as in the inbox from now on, not as expected (load() reads both under mutex_).
      if (handoff.state != nullptr) handoff.state->expected_at_decode.settle();
      Command command;
      command.kind = Command::Kind::kIncoming;
      command.id = handoff.request.id;
      command.handoff = std::move(handoff);
      inbox_.push_back(std::move(command));
    } else {
      refused.emplace(std::move(handoff));
    }
  }
  if (!refused) {
    wake_.notify_one();
    return;
  }
  // This driver stopped (the service is shutting down): the request ends as every request still
  // in flight at shutdown does.
  if (refused->staged) let_go_of_stage(*refused->staged);
  refused->state->stream->finish(Finish::kAbort, Timings{},
                                 abort_error_text(AbortCause::kShutdown));
  sink_.forget(std::span<const uint64_t>(&refused->state->numeric_id, 1));
}

void EngineDriver::enqueue_release(uint64_t id) {
  Command command;
  command.kind = Command::Kind::kRelease;
  command.id = id;
  push(std::move(command));
}

hw_engine_load EngineDriver::load() const {
  std::lock_guard lock(mutex_);
  hw_engine_load load = published_;
  // Requests routed here but not yet in the engine count as waiting, so that a burst of submits
  // spreads over the engines instead of all landing on the one that looked idle.
  load.waiting += inbox_submits_;
  load.queued_prefill_tokens += inbox_prompt_tokens_;
  load.outstanding_tokens += inbox_prompt_tokens_ + inbox_output_tokens_;
  load.waiting += inbox_handoffs_;
  load.outstanding_tokens += inbox_handoff_tokens_;
  load.waiting += expected_->requests.load();
  load.outstanding_tokens += expected_->tokens.load();
  load.alive = alive_ ? 1 : 0;
  return load;
}

void EngineDriver::take_kv_events(std::vector<hw_kv_event>& out) {
  std::lock_guard lock(mutex_);
  if (published_events_ != nullptr) published_events_->move_into(out);
}

uint32_t EngineDriver::waiting_including_inbox() const {
  std::lock_guard lock(mutex_);
  // (Applied hand-offs waiting for room or for their copy are in published_.waiting already.)
  return published_.waiting + inbox_submits_ + inbox_handoffs_;
}

bool EngineDriver::alive() const {
  std::lock_guard lock(mutex_);
  return alive_;
}

double EngineDriver::step_seconds() const {
  const int64_t began = step_began_ns_.load();
  if (began == 0) return 0.0;
  return std::max<double>(0.0, static_cast<double>(steady_ns() - began) * 1e-9);
}

void EngineDriver::run() {
  bool stop = false;
  while (!stop) {
    {
      std::unique_lock lock(mutex_);
      const auto ready = [&] { return stopping_ || !inbox_.empty() || runnable_; };
      if (!arriving_.empty() || !staging_.empty()) {
        // KV copies in flight: poll them again soon even when nothing else happens.
        wake_.wait_for(lock, std::chrono::microseconds(200), ready);
      } else if (holding_ > 0) {
        // Only KV held for peer links (kv_handoff = "link"), which may wait up to its hold time
        // for a pull: a millisecond late in freeing sent blocks costs less than 5,000 wake-ups a
        // second for as long.
        wake_.wait_for(lock, std::chrono::milliseconds(1), ready);
      } else {
        wake_.wait(lock, ready);
      }
      applying_.swap(inbox_);
      stop = stopping_;
    }
    for (Command& command : applying_) {
      if (command.kind == Command::Kind::kSubmit) {
        ++applied_submits_;
        applied_prompt_tokens_ += command.request.prompt.size();
        applied_output_tokens_ += command.request.max_output_tokens;
      } else if (command.kind == Command::Kind::kIncoming) {
        ++applied_handoffs_;
        applied_handoff_tokens_ += tokens_left(command.handoff);
      }
      apply(command);
    }
    applying_.clear();
    if (stop) {
      // Shutting down: every request still here ends now, with its KV blocks freed.
      shutting_down_ = true;
      std::vector<uint64_t> ids;
      ids.reserve(requests_.size());
      for (const auto& [id, request] : requests_) ids.push_back(id);
      // (A failed engine has ended its requests already.)
      for (uint64_t id : ids) engine_.abort(id);
      // Requests on their way here end too; their prefill engines are shutting down as well.
      const double now = engine_.clock().now();
      for (Handoff& handoff : incoming_) drop_incoming(handoff, Finish::kAbort, now, {});
      incoming_.clear();
      // The transport reads and writes the block lists and memory of `arriving_` and `staging_`
      // until each copy is over: wait for them before they go.
      for (Arriving& arriving : arriving_) {
        wait_for_arrival(arriving);
        const bool sent = arriving.pull && arriving.pull->state == KvPull::State::kPosted;
        if (arriving.handoff.staged && !sent) let_go_of_stage(*arriving.handoff.staged);
        end_request(*arriving.handoff.state, Finish::kAbort, now, {});
        finished_ids_.push_back(arriving.handoff.state->numeric_id);
      }
      arriving_.clear();
      for (Staging& staging : staging_) {
        wait_for_transfer(staging.transfer);
        staging.aborted = true;
        try {
          end_staging(staging, HW_TRANSFER_FAILED);
        } catch (const std::exception& e) {  // freeing its blocks failed: the engine goes anyway
          spdlog::error("engine{}: {}", engine_.config().index, e.what());
        }
      }
      staging_.clear();
      if (HeldKv* held = handoff_ != nullptr ? handoff_->held() : nullptr) {
        // Sends in flight read our blocks: they finish first; nothing is sent from here on.
        held_released_scratch_.clear();
        held->close(engine_.config().index, held_released_scratch_);
        for (uint64_t id : held_released_scratch_) {
          try {
            if (engine_ok_) engine_.release_transferred(id);
          } catch (const std::exception& e) {
            spdlog::error("engine{}: {}", engine_.config().index, e.what());
          }
        }
        holding_ = 0;
      }
      // A prefill engine's driver may still hand requests over while the drivers stop one after
      // the other: from now on enqueue_incoming() ends them itself; those already queued end here.
      {
        std::lock_guard lock(mutex_);
        exited_ = true;
        applying_.swap(inbox_);
      }
      for (Command& command : applying_) {
        if (command.kind == Command::Kind::kIncoming) {
          drop_incoming(command.handoff, Finish::kAbort, now, {});
        }
      }
      applying_.clear();
    } else {
      try {
        if (handoff_ != nullptr) {
          finish_staging();
          finish_arrivals();
          if (holding_ > 0) collect_held();
        }
        start_arrivals();
      } catch (const std::exception& e) {  // an engine call refused a hand-off: a broken invariant
        fail(e.what());
      }
      step_once();
    }
    publish();
  }
}

void EngineDriver::wait_for_transfer(uint64_t handle) {
  while (true) {
    int32_t state = HW_TRANSFER_FAILED;
    try {
      state = handoff_->poll(handle).state;
    } catch (const std::exception&) {  // the transport gave up on it
    }
    if (state == HW_TRANSFER_DONE || state == HW_TRANSFER_FAILED) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

core::KvTransportInstance::Progress EngineDriver::progress_of(const Arriving& arriving) {
  if (arriving.nothing_to_copy) return {HW_TRANSFER_DONE, 0.0};
  uint64_t transfer = arriving.transfer;
  if (arriving.pull) {
    switch (arriving.pull->state.load()) {
      case KvPull::State::kQueued:
      case KvPull::State::kRequesting:
        return {HW_TRANSFER_PENDING, 0.0};
      case KvPull::State::kDeclined:
      case KvPull::State::kCancelled:
        return {HW_TRANSFER_FAILED, 0.0};
      case KvPull::State::kPosted:
        transfer = arriving.pull->transfer;
        break;
    }
  }
  try {
    return handoff_->poll(transfer);
  } catch (const std::exception& e) {  // the transport gave up on it
    spdlog::error("engine{}: polling the KV transfer of request {}: {}", engine_.config().index,
                  arriving.id, e.what());
    return {HW_TRANSFER_FAILED, 0.0};
  }
}

void EngineDriver::wait_for_arrival(Arriving& arriving) {
  if (arriving.nothing_to_copy) return;  // no transfer was started
  if (!arriving.pull) {
    wait_for_transfer(arriving.transfer);
    return;
  }
  if (handoff_->links()->cancel(*arriving.pull)) return;  // never asked for
  KvLinks::wait_settled(*arriving.pull);
  if (arriving.pull->state == KvPull::State::kPosted) wait_for_transfer(arriving.pull->transfer);
}

void EngineDriver::let_go_of_stage(const KvStage& stage) {
  abandon_kv_stage(stage, [this](const KvStage& held) {
    if (handoff_ != nullptr && handoff_->links() != nullptr) handoff_->links()->drop(held);
    // (else it expires in its holder)
  });
}

void EngineDriver::collect_held() {
  held_released_scratch_.clear();
  holding_ = handoff_->held()->collect(engine_.config().index, held_released_scratch_);
  for (uint64_t id : held_released_scratch_) {
    if (engine_ok_) engine_.release_transferred(id);
  }
}

void EngineDriver::apply(Command& command) {
  switch (command.kind) {
    case Command::Kind::kAbort:
      apply_abort(command);
      return;
    case Command::Kind::kIncoming:
      apply_incoming(std::move(command.handoff));
      return;
    case Command::Kind::kRelease:
      handed_off_.erase(command.id);
      if (engine_ok_) engine_.release_transferred(command.id);
      return;
    case Command::Kind::kSubmit:
      break;
  }
  InFlightRequest& state = *command.state;
  const uint64_t id = command.id;
  if (!engine_ok_) {
    end_request(
        state, Finish::kError, engine_.clock().now(),
        fmt::format("engine{} has failed and serves no more requests", engine_.config().index));
    finished_ids_.push_back(state.numeric_id);
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
    finished_ids_.push_back(slot->second->numeric_id);
    requests_.erase(slot);
    return;
  }
  (void)inserted;
  slot->second->series.prompt_tokens->add(slot->second->stream->prompt_tokens());
}

void EngineDriver::apply_abort(const Command& command) {
  auto it = requests_.find(command.id);
  if (it != requests_.end()) {
    it->second->abort_cause = combined(it->second->abort_cause, command.abort_cause);
    if (engine_ok_) {
      engine_.abort(command.id);  // on_finished() ends the stream
    }
    return;
  }
  // Handed to a decode engine after the service sent the abort there: that driver ignored it, so
  // it goes there again, behind the hand-off.
  if (auto handed = handed_off_.find(command.id); handed != handed_off_.end()) {
    handoff_->driver(handed->second).enqueue_abort(command.id, command.abort_cause);
    return;
  }
  for (auto waiting = incoming_.begin(); waiting != incoming_.end(); ++waiting) {
    if (waiting->request.id != command.id) continue;
    waiting->state->abort_cause = combined(waiting->state->abort_cause, command.abort_cause);
    drop_incoming(*waiting, Finish::kAbort, engine_.clock().now(), {});
    incoming_.erase(waiting);
    return;
  }
  for (Arriving& arriving : arriving_) {
    if (arriving.id != command.id) continue;
    arriving.aborted = true;  // ended once its copy finished (the transport is writing our blocks)
    arriving.handoff.state->abort_cause =
        combined(arriving.handoff.state->abort_cause, command.abort_cause);
    return;
  }
  for (Staging& staging : staging_) {
    if (staging.id != command.id) continue;
    staging.aborted = true;  // ended once its copy finished (the transport is reading our blocks)
    staging.state->abort_cause = combined(staging.state->abort_cause, command.abort_cause);
    return;
  }
  // Otherwise it finished meanwhile.
}

void EngineDriver::apply_incoming(Handoff handoff) {
  if (!engine_ok_) {
    drop_incoming(handoff, Finish::kError, engine_.clock().now(),
                  fmt::format("engine{} (the decode engine) has failed and serves no more requests",
                              engine_.config().index));
    return;
  }
  incoming_.push_back(std::move(handoff));
}

void EngineDriver::release_source(const Handoff& handoff, uint64_t id, bool held_kv_sent) {
  if (handoff.staged) {
    if (!held_kv_sent) let_go_of_stage(*handoff.staged);
    return;
  }
  handoff_->driver(handoff.source_engine).enqueue_release(id);
}

void EngineDriver::drop_incoming(Handoff& handoff, Finish reason, double time, std::string error) {
  release_source(handoff, handoff.request.id);
  end_request(*handoff.state, reason, time, std::move(error));
  finished_ids_.push_back(handoff.state->numeric_id);
}

void EngineDriver::stage_out(uint64_t id) {
  auto it = requests_.find(id);
  // Before the state leaves requests_: if the engine refuses (a broken invariant), fail() ends it.
  const core::OutgoingTransfer out = engine_.outgoing(id);
  const hw_memory_desc memory = engine_.kv_memory();
  const uint32_t block_size = engine_.config().block_size;
  Staging staging;
  staging.id = id;
  staging.state = std::move(it->second);
  requests_.erase(it);
  staging.computed_tokens = out.request.computed_tokens;
  const uint32_t count = (staging.computed_tokens + block_size - 1) / block_size;
  std::optional<KvStage> written;
  std::string error;
  try {
    if (out.blocks->size() < count) {
      throw core::Error(fmt::format("request {} holds {} KV blocks for {} computed tokens", id,
                                    out.blocks->size(), staging.computed_tokens),
                        HW_INTERNAL);
    }
    const std::string name = kv_stage_name(engine_.config().index, id);
    const std::span<const uint32_t> blocks(out.blocks->data(), count);
    if (handoff_ != nullptr && handoff_->held() != nullptr) {
      // kv_handoff = "link": the KV stays in this engine's blocks until the decode process pulls
      // it (or its hold time passes); collect_held() frees them then.
      KvStage held;
      held.shm_name = name;
      held.computed_tokens = staging.computed_tokens;
      held.block_count = count;
      held.block_bytes = memory.block_bytes;
      held.block_size = block_size;
      held.held = true;
      handoff_->held()->hold(engine_.config().index, id, held, memory,
                             std::vector<uint32_t>(blocks.begin(), blocks.end()));
      ++holding_;
      end_request(*staging.state, Finish::kHandoff, engine_.clock().now(), {}, std::move(held));
      finished_ids_.push_back(staging.state->numeric_id);
      return;
    }
    if (handoff_ != nullptr && memory.base != nullptr) {
      // The transport copies on its own thread (host_copy: memcpy, or cudaMemcpyAsync from a
      // GPU) while this engine steps on; finish_staging() ends the request when it is done.
      try {
        staging.writer = std::make_unique<KvStageWriter>(name, count, memory.block_bytes);
        staging.source_blocks.assign(blocks.begin(), blocks.end());
        staging.stage_blocks.resize(count);
        std::iota(staging.stage_blocks.begin(), staging.stage_blocks.end(), 0u);
        const hw_kv_transfer transfer{sizeof(hw_kv_transfer),
                                      id,
                                      memory,
                                      staging.writer->memory(),
                                      staging.source_blocks.data(),
                                      staging.stage_blocks.data(),
                                      count,
                                      engine_.config().index,
                                      engine_.config().index};
        staging_.reserve(staging_.size() + 1);  // once started, nothing may throw
        staging.transfer = handoff_->start(transfer);
        staging_.push_back(std::move(staging));
        return;
      } catch (const std::exception& e) {
        staging.writer.reset();  // removes the object
        if (memory.kind != HW_MEMORY_HOST) throw;
        // Host KV: a transport that will not stage it (nccl takes GPU memory only) is no reason
        // to fail the request; the copy is made here instead.
        spdlog::warn(
            "engine{}: the KV transport ({}) did not stage request {} ({}); copying it here",
            engine_.config().index, handoff_->transport_name(), staging.state->id, e.what());
      }
    }
    written = write_kv_stage(name, memory, blocks, staging.computed_tokens, block_size);
  } catch (const std::exception& e) {  // nothing is being copied: the request fails
    error = fmt::format("engine{} could not hand the request over: {}", engine_.config().index,
                        e.what());
  }
  // Copied here, or failed: the request ends, then this engine is done with the blocks (last: a
  // refusal there is a broken invariant that fails the engine, and the request has ended).
  const double now = engine_.clock().now();
  if (written) {
    end_request(*staging.state, Finish::kHandoff, now, {}, std::move(written));
  } else {
    end_request(*staging.state, Finish::kError, now, std::move(error));
  }
  finished_ids_.push_back(staging.state->numeric_id);
  engine_.release_transferred(id);
}

void EngineDriver::finish_staging() {
  for (size_t i = 0; i < staging_.size();) {
    int32_t state = HW_TRANSFER_FAILED;
    try {
      state = handoff_->poll(staging_[i].transfer).state;
    } catch (const std::exception& e) {
      spdlog::error("engine{}: polling the KV copy of request {} into shared memory: {}",
                    engine_.config().index, staging_[i].id, e.what());
    }
    if (state != HW_TRANSFER_DONE && state != HW_TRANSFER_FAILED) {
      ++i;
      continue;
    }
    Staging done = std::move(staging_[i]);  // the transport is done with its block lists
    staging_[i] = std::move(staging_.back());
    staging_.pop_back();
    end_staging(done, state);
  }
}

void EngineDriver::end_staging(Staging& staging, int32_t transfer_state) {
  InFlightRequest& state = *staging.state;
  const double now = engine_.clock().now();
  if (staging.aborted) {
    staging.writer.reset();  // nobody will read it
    end_request(state, Finish::kAbort, now, {});
  } else if (transfer_state == HW_TRANSFER_DONE) {
    // A copy the transport reports done holds the prefilled KV, even if the engine failed since.
    end_request(state, Finish::kHandoff, now, {},
                staging.writer->commit(staging.computed_tokens, engine_.config().block_size));
  } else {
    staging.writer.reset();
    end_request(state, Finish::kError, now,
                fmt::format("engine{} could not hand the request over: the KV transport ({}) "
                            "failed to copy its KV into shared memory",
                            engine_.config().index, handoff_->transport_name()));
  }
  finished_ids_.push_back(state.numeric_id);
  // Last: a refusal is a broken invariant that fails the engine; the request has ended.
  if (engine_ok_) engine_.release_transferred(staging.id);
}

bool EngineDriver::arrive_from_stage(Handoff& handoff) {
  const KvStage& stage = *handoff.staged;
  const uint64_t id = handoff.request.id;
  std::string problem = stage_problem(stage);
  // Checked before blocks are reserved for it (a wait for room that would end in a prefill).
  if (problem.empty()) problem = kv_stage_memcpy_problem(engine_.kv_memory());
  if (problem.empty()) {
    bool reserved = false;
    try {
      reserved = engine_.reserve_incoming(handoff.request);
    } catch (const std::exception& e) {  // can never fit here: the client learns why
      drop_incoming(handoff, Finish::kError, engine_.clock().now(), e.what());
      return true;
    }
    if (!reserved) return false;  // no room yet: it waits, and so do those behind it
    record_wait(handoff, engine_.clock().now());
    const auto begin = std::chrono::steady_clock::now();
    problem = read_kv_stage(stage, engine_.kv_memory(), engine_.incoming_blocks(id),
                            engine_.incoming_cached_blocks(id));
    if (problem.empty()) {
      record_arrival(
          *handoff.state, id, &stage,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
      discard_kv_stage(stage.shm_name);
      requests_.emplace(id, std::move(handoff.state));
      engine_.complete_transfer(id);
      return true;
    }
    engine_.release_transferred(id);  // the reservation goes: the request is prefilled instead
  }
  prefill_instead_of_stage(handoff, problem);
  return true;
}

void EngineDriver::record_arrival(InFlightRequest& state, uint64_t id, const KvStage* stage,
                                  double copy_seconds) {
  state.record.kv_transfer_seconds = copy_seconds;
  state.record.kv_moved = true;
  if (stage != nullptr) {
    state.record.kv_transfer_seconds += stage->fetch_seconds;
    if (stage->fetched != nullptr) state.kv_network_bytes = stage->fetched->size();
  }
  // At the arrival, not the reservation: a request whose copy fails is prefilled here instead.
  const uint32_t cached = engine_.incoming_cached_blocks(id) * engine_.config().block_size;
  state.kv_cached_tokens = cached;
  if (cached > 0) metrics_.kv_cached_tokens.add(static_cast<double>(cached));
}

std::string EngineDriver::stage_problem(const KvStage& stage) const {
  std::string problem = kv_stage_model_problem(stage, engine_.model_info());
  if (problem.empty()) {
    problem = kv_stage_problem(stage, engine_.kv_memory(), engine_.config().block_size);
  }
  return problem;
}

void EngineDriver::prefill_instead_of_stage(Handoff& handoff, const std::string& problem) {
  let_go_of_stage(*handoff.staged);
  spdlog::warn(
      "engine{}: the staged KV of request \"{}\" cannot be used ({}); prefilling its {} "
      "tokens here",
      engine_.config().index, handoff.state->id, problem, handoff.request.tokens.size());
  prefill_here(handoff);
}

void EngineDriver::prefill_here(Handoff& handoff) {
  const uint64_t id = handoff.request.id;
  // Its first token was timed where it was prefilled.
  handoff.state->continued = true;
  // The prompt and the tokens generated so far become this engine's prompt; it generates the rest.
  core::NewRequest request;
  request.id = id;
  request.class_index = handoff.request.class_index;
  request.prompt_tokens = static_cast<uint32_t>(handoff.request.tokens.size());
  request.prompt = std::move(handoff.request.tokens);
  request.max_output_tokens = handoff.request.max_output_tokens - handoff.request.output_tokens;
  request.priority = handoff.request.priority;
  request.arrival = handoff.request.arrival;
  request.sampling = std::move(handoff.request.sampling);
  // Its prompt's figures were reported where it was prefilled (or, continued from another
  // process's stage, by that process): computing them again would only cost.
  request.sampling.prompt_logprobs = -1;
  // Seeded sampling goes on where the prefill engine left it, not from output 0 again.
  request.outputs_before = handoff.request.output_tokens;
  request.record = &handoff.state->record;
  auto [slot, inserted] = requests_.emplace(id, std::move(handoff.state));
  (void)inserted;
  // Its prompt was counted where it was admitted (the prefill here is in the step figures).
  try {
    engine_.add_request(std::move(request));
  } catch (const std::exception& e) {
    end_request(*slot->second, Finish::kError, engine_.clock().now(), e.what());
    finished_ids_.push_back(slot->second->numeric_id);
    requests_.erase(slot);
  }
}

void EngineDriver::hand_off_prefilled() {
  engine_.take_prefilled(prefilled_scratch_, prefill_finished_scratch_);
  // (Those that finished with their first token ended through on_finished() already.)
  for (uint64_t id : prefilled_scratch_) {
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second->stage_kv) {
      stage_out(id);
      continue;
    }
    core::OutgoingTransfer out = engine_.outgoing(id);
    if (it == requests_.end() || handoff_ == nullptr) {  // nowhere to continue it
      engine_.release_transferred(id);
      if (it != requests_.end()) {
        end_request(*it->second, Finish::kError, engine_.clock().now(),
                    fmt::format("engine{} prefilled the request for a KV transfer that nothing "
                                "can make (no [kv_transport])",
                                engine_.config().index));
        finished_ids_.push_back(it->second->numeric_id);
        requests_.erase(it);
      }
      continue;
    }
    Handoff handoff;
    handoff.request = std::move(out.request);
    // Copied: the engine's list may move when it admits more requests.
    handoff.source_blocks = *out.blocks;
    handoff.source_kv = engine_.kv_memory();
    handoff.source_engine = engine_.config().index;
    handoff.ready = engine_.clock().now();
    handoff.state = std::move(it->second);
    handoff.request.record = &handoff.state->record;
    // What happens to it from here (its tokens, inter-token latencies, finish) is the decode
    // engine's, as a router process counts a continuation; its prompt and first token stay here.
    if (handoff.state->decode_series) handoff.state->series = *handoff.state->decode_series;
    const uint32_t destination = handoff.state->decode_engine;
    requests_.erase(it);
    handed_off_.emplace(id, destination);
    handoff_->driver(destination).enqueue_incoming(std::move(handoff));
  }
}

void EngineDriver::start_arrivals() {
  while (engine_ok_ && !incoming_.empty()) {
    Handoff& next = incoming_.front();
    if (next.staged && next.staged->held &&
        (handoff_ == nullptr || handoff_->links() == nullptr || !handoff_->links()->can_pull())) {
      prefill_instead_of_stage(next,
                               "its prefill process holds it for a peer link, and this process's "
                               "[kv_transport] has no peer links");
      incoming_.pop_front();
      continue;
    }
    if (next.staged && handoff_ == nullptr) {  // no transport: copied here
      if (!arrive_from_stage(next)) break;
      incoming_.pop_front();
      continue;
    }
    if (next.staged) {
      const std::string problem = stage_problem(*next.staged);
      if (!problem.empty()) {
        prefill_instead_of_stage(next, problem);
        incoming_.pop_front();
        continue;
      }
    }
    const uint64_t id = next.request.id;
    const uint32_t computed = next.request.computed_tokens;
    // A peer link sends the holder's whole stage, so such KV cannot skip the blocks cached here.
    const bool whole_stage = next.staged && next.staged->held;
    bool reserved = false;
    try {
      reserved = engine_.reserve_incoming(next.request, /*reuse_cached=*/!whole_stage);
    } catch (const std::exception& e) {  // can never fit here: the client learns why
      end_request(*next.state, Finish::kError, engine_.clock().now(), e.what());
      finished_ids_.push_back(next.state->numeric_id);
      release_source(next, id);
      incoming_.pop_front();
      continue;
    }
    if (!reserved) break;  // no room yet: it waits, and so do those behind it
    record_wait(next, engine_.clock().now());
    Arriving arriving;
    arriving.id = id;
    arriving.handoff = std::move(next);
    incoming_.pop_front();
    arriving.blocks = engine_.incoming_blocks(id);
    const uint32_t block_size = engine_.config().block_size;
    const uint32_t count = (computed + block_size - 1) / block_size;
    std::string failure;
    if (arriving.handoff.staged && arriving.handoff.staged->held) {
      if (arriving.blocks.size() < count) {
        failure = fmt::format("request {}: {} KV blocks reserved for {}", id,
                              arriving.blocks.size(), count);
      } else {
        // The link thread asks the holder to send, then posts the receive into these blocks.
        arriving.pull = handoff_->links()->pull(
            *arriving.handoff.staged, engine_.kv_memory(),
            std::vector<uint32_t>(arriving.blocks.begin(), arriving.blocks.begin() + count));
        arriving_.push_back(std::move(arriving));
        continue;
      }
    } else if (arriving.handoff.staged) {
      // Another process's stage: the transport reads its blocks back to back from the mapping.
      arriving.stage_bytes = std::make_unique<KvStageReader>(*arriving.handoff.staged);
      failure = arriving.stage_bytes->error();
      arriving.handoff.source_kv = arriving.stage_bytes->memory();
      arriving.handoff.source_blocks.resize(arriving.handoff.staged->block_count);
      std::iota(arriving.handoff.source_blocks.begin(), arriving.handoff.source_blocks.end(), 0u);
    }
    if (failure.empty() &&
        (arriving.handoff.source_blocks.size() < count || arriving.blocks.size() < count)) {
      failure = fmt::format("request {}: {} holds {} KV blocks, engine{} expects {}", id,
                            source_of(arriving.handoff), arriving.handoff.source_blocks.size(),
                            engine_.config().index, count);
    }
    // The leading blocks this engine's prefix cache held already are not copied.
    const uint32_t cached = engine_.incoming_cached_blocks(id);
    if (failure.empty() && cached >= count) {
      arriving.nothing_to_copy = true;
      arriving_.push_back(std::move(arriving));
      continue;
    }
    if (failure.empty()) {
      const hw_kv_transfer transfer{sizeof(hw_kv_transfer),
                                    id,
                                    arriving.handoff.source_kv,
                                    engine_.kv_memory(),
                                    arriving.handoff.source_blocks.data() + cached,
                                    arriving.blocks.data() + cached,
                                    count - cached,
                                    arriving.handoff.source_engine,
                                    engine_.config().index};
      // The block lists live in `arriving` (moving it keeps their buffers) until the copy is done.
      try {
        arriving.transfer = handoff_->start(transfer);
      } catch (const std::exception& e) {  // the transport refused it: nothing is being copied
        failure = e.what();
      }
    }
    if (!failure.empty()) {             // nothing is being copied: prefill it here instead
      engine_.release_transferred(id);  // the reservation goes
      release_source(arriving.handoff, id);
      spdlog::warn(
          "engine{}: the KV transfer ({}) of request \"{}\" from {} could not start ({}); "
          "prefilling its {} tokens here",
          engine_.config().index, handoff_->transport_name(), arriving.handoff.state->id,
          source_of(arriving.handoff), failure, arriving.handoff.request.tokens.size());
      prefill_here(arriving.handoff);
      continue;
    }
    arriving_.push_back(std::move(arriving));
  }
}

void EngineDriver::finish_arrivals() {
  for (size_t i = 0; i < arriving_.size();) {
    const core::KvTransportInstance::Progress progress = progress_of(arriving_[i]);
    if (progress.state != HW_TRANSFER_DONE && progress.state != HW_TRANSFER_FAILED) {
      warn_if_overdue(arriving_[i], progress.state);
      ++i;
      continue;
    }
    Arriving done = std::move(arriving_[i]);  // the transport is done with its block lists
    arriving_[i] = std::move(arriving_.back());
    arriving_.pop_back();
    const uint64_t id = done.id;
    release_source(done.handoff, id, done.pull && done.pull->state == KvPull::State::kPosted);
    InFlightRequest& state = *done.handoff.state;
    const double now = engine_.clock().now();
    if (!engine_ok_) {
      end_request(state, Finish::kError, now,
                  fmt::format("engine{} (the decode engine) has failed", engine_.config().index));
      finished_ids_.push_back(state.numeric_id);
      continue;
    }
    if (progress.state == HW_TRANSFER_FAILED) {
      engine_.release_transferred(id);  // the reservation goes
      if (done.aborted) {
        end_request(state, Finish::kAbort, now, {});
        finished_ids_.push_back(state.numeric_id);
        continue;
      }
      spdlog::warn(
          "engine{}: the KV transfer ({}) of request \"{}\" from {} failed{}; prefilling its {} "
          "tokens here",
          engine_.config().index, handoff_->transport_name(), state.id, source_of(done.handoff),
          done.pull && !done.pull->problem.empty() ? " (" + done.pull->problem + ")" : "",
          done.handoff.request.tokens.size());
      prefill_here(done.handoff);
      continue;
    }
    record_arrival(state, id, done.handoff.staged ? &*done.handoff.staged : nullptr,
                   progress.seconds);
    requests_.emplace(id, std::move(done.handoff.state));
    engine_.complete_transfer(id);
    if (done.aborted) engine_.abort(id);  // on_finished() ends the stream
  }
}

void EngineDriver::warn_if_overdue(Arriving& arriving, int32_t state) {
  // The host cannot take back blocks a transport may still write (docs/sdk.md), so a transfer that
  // never ends holds its request for good; saying so once lets an operator see which and why.
  if (arriving.overdue_warned) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - arriving.since).count();
  if (seconds < kOverdueTransferSeconds) return;
  arriving.overdue_warned = true;
  // A pull over a peer link is polled only once the holder has posted its send.
  const bool posted = !arriving.pull || arriving.pull->state == KvPull::State::kPosted;
  const std::string answer = !posted ? std::string("the holder has not posted its send yet")
                             : state == HW_TRANSFER_PENDING
                                 ? std::string("poll() answers PENDING")
                                 : fmt::format("poll() answers state {}", state);
  spdlog::warn(
      "engine{}: the KV transfer ({}) of request \"{}\" from {} has not ended after {:.0f} s "
      "({}); the request waits for it, with its {} KV blocks here, for as long as the transport "
      "keeps it",
      engine_.config().index, handoff_->transport_name(), arriving.handoff.state->id,
      source_of(arriving.handoff), seconds, answer, arriving.blocks.size());
}

void EngineDriver::step_once() {
  runnable_ = false;
  if (!engine_ok_ || !engine_.has_work()) return;
  try {
    // No lock is held here: frontends keep queueing into the inbox during the forward pass.
    step_began_ns_.store(steady_ns());
    runnable_ = engine_.step();
    step_began_ns_.store(0);
  } catch (const std::exception& e) {
    step_began_ns_.store(0);
    fail(e.what());
    return;
  }
  // A step that planned nothing leaves the engine as it was: wait for the next command instead of
  // spinning (the simulator treats it as a stuck scheduler; here new work may unstick it).
  if (!runnable_) return;
  try {
    hand_off_prefilled();
  } catch (const std::exception& e) {  // an engine call refused a hand-off: a broken invariant
    fail(e.what());
    return;
  }
  const core::StepDetail& step = engine_.last_step();
  trace([&] { step_trace_->write(engine_.config().index, step); });
  if (step.prefill_tokens > 0) metrics_.prefill_tokens_per_step.observe(step.prefill_tokens);
  if (step.decode_tokens > 0) metrics_.decode_tokens_per_step.observe(step.decode_tokens);
  if (!step.preempted.empty()) metrics_.preemptions.add(static_cast<double>(step.preempted.size()));
  if (step.prefix_queried_tokens > 0) {
    metrics_.prefix_cache_queries.add(static_cast<double>(step.prefix_queried_tokens));
    metrics_.prefix_cache_hits.add(static_cast<double>(step.prefix_hit_tokens));
  }
}

void EngineDriver::publish() {
  hw_engine_load load = engine_.load();
  if (!engine_ok_) load.alive = 0;
  // Hand-offs waiting for KV room or for their copy: queued work the engine does not know yet.
  for (const Handoff& handoff : incoming_) {
    ++load.waiting;
    load.outstanding_tokens += tokens_left(handoff);
  }
  for (const Arriving& arriving : arriving_) {
    ++load.waiting;
    load.outstanding_tokens += tokens_left(arriving.handoff);
  }
  // Prefilled requests whose KV is being copied out still hold their blocks: running, as before
  // the engine let go of them.
  load.running += static_cast<uint32_t>(staging_.size());
  metrics_.running.set(load.running);
  metrics_.waiting.set(load.waiting);
  metrics_.kv_usage.set(load.kv_blocks_total == 0 ? 0.0
                                                  : 1.0 - static_cast<double>(load.kv_blocks_free) /
                                                              load.kv_blocks_total);
  if (published_events_ != nullptr) engine_.take_kv_events(step_events_);
  {
    std::lock_guard lock(mutex_);
    published_ = load;
    if (published_events_ != nullptr) published_events_->append(step_events_);
    alive_ = engine_ok_;
    // The applied submits are in `load` now: stop counting them as still in the inbox (in the same
    // critical section, so that no reader sees them in neither or in both).
    inbox_submits_ -= applied_submits_;
    inbox_prompt_tokens_ -= applied_prompt_tokens_;
    inbox_output_tokens_ -= applied_output_tokens_;
    inbox_handoffs_ -= applied_handoffs_;
    inbox_handoff_tokens_ -= applied_handoff_tokens_;
  }
  step_events_.clear();
  applied_handoffs_ = 0;
  applied_handoff_tokens_ = 0;
  applied_submits_ = 0;
  applied_prompt_tokens_ = 0;
  applied_output_tokens_ = 0;
  // Forgotten only after the load that reflects their finish is visible (see in_flight()).
  if (!finished_ids_.empty()) {
    sink_.forget(finished_ids_);
    finished_ids_.clear();
  }
  for (PendingFinish& f : finishing_) {
    f.stream->finish(f.reason, f.timings, std::move(f.error), std::move(f.kv_stage));
  }
  finishing_.clear();
}

void EngineDriver::fail(const std::string& why) {
  // The engine's own errors start with its name ("engine0: step 37: …"): said once.
  std::string_view reason = why;
  const std::string own = engine_.config().name + ": ";
  if (reason.starts_with(own)) reason.remove_prefix(own.size());
  const std::string message = fmt::format("engine{} failed and was taken out of service: {}",
                                          engine_.config().index, reason);
  spdlog::error("{}", message);
  engine_ok_ = false;
  metrics_.alive.set(0);
  const double now = engine_.clock().now();
  for (auto& [id, request] : requests_) {
    end_request(*request, Finish::kError, now, message);
    finished_ids_.push_back(request->numeric_id);
  }
  requests_.clear();
  // Requests waiting to arrive end too (their prefill engines free their KV); copies in flight
  // end when the transport is done with our blocks (finish_arrivals()).
  for (Handoff& handoff : incoming_) drop_incoming(handoff, Finish::kError, now, message);
  incoming_.clear();
}

void EngineDriver::end_request(InFlightRequest& request, Finish reason, double time,
                               std::string error, std::optional<KvStage> kv_stage) {
  const core::RequestRecord& r = request.record;
  Timings timings;
  const double arrival = std::isnan(r.arrival) ? time : r.arrival;
  timings.e2e_seconds = time - arrival;
  timings.queue_seconds = std::isnan(r.scheduled) ? timings.e2e_seconds : r.scheduled - arrival;
  timings.ttft_seconds = std::isnan(r.first_token) ? 0.0 : r.first_token - arrival;
  timings.kv_transfer_seconds = r.kv_transfer_seconds;
  // A request whose copy could not start, or failed, was prefilled here instead: its KV never
  // moved.
  timings.kv_wait_seconds = r.kv_moved ? r.kv_wait_seconds : 0.0;
  timings.kv_network_bytes = request.kv_network_bytes;
  timings.kv_moved = r.kv_moved;
  timings.kv_cached_tokens = r.kv_moved ? request.kv_cached_tokens : 0;
  const Finish counted = request.abort_cause == AbortCause::kStopString ? Finish::kStop : reason;
  if (reason == Finish::kAbort && error.empty()) {
    // At shutdown a request keeps the cause it had (a client's abort waiting for a KV copy).
    error = abort_error_text(
        combined(request.abort_cause, shutting_down_ ? AbortCause::kShutdown : AbortCause::kNone));
  }
  if (reason != Finish::kHandoff) {  // a hand-off is not an end: the request goes on elsewhere
    request.series.finished_with(counted).add();
    request.series.e2e_latency->observe(timings.e2e_seconds);
  }
  request.series.queue_time->observe(timings.queue_seconds);
  if (r.kv_moved) {
    metrics_.kv_transfers.add();
    metrics_.kv_transfer_seconds.observe(r.kv_transfer_seconds);
    metrics_.kv_wait_seconds.observe(r.kv_wait_seconds);
    metrics_.kv_network_bytes.add(static_cast<double>(request.kv_network_bytes));
  }
  if (kv_stage) {
    // Which model's KV it is, for the process that decodes it (kv_stage_model_problem).
    const hw_model_info& model = engine_.model_info();
    kv_stage->layers = model.layers;
    kv_stage->kv_heads = model.kv_heads;
    kv_stage->head_dim = model.head_dim;
  }
  // Delivered in publish(), after the id is forgotten (see finishing_).
  finishing_.push_back(
      PendingFinish{request.stream, reason, timings, std::move(error), std::move(kv_stage)});
}

void EngineDriver::on_token(uint64_t request_id, int32_t token, double time,
                            const core::SampledLogprobs* logprobs) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  InFlightRequest& request = *it->second;
  if (request.record.output_tokens <= 1 && !request.continued) {
    // The engine counts the token in the record before calling back.
    request.series.time_to_first_token->observe(time - request.record.arrival);
    if (request.record.cached_tokens > 0) {
      request.stream->note_cached_prompt_tokens(request.record.cached_tokens);
    }
  } else {
    request.series.inter_token_latency->observe(time - request.last_token_time);
  }
  request.last_token_time = time;
  request.series.generation_tokens->add();
  request.stream->push_tokens(
      std::span<const int32_t>(&token, 1),
      logprobs != nullptr ? std::span(logprobs, 1) : std::span<const core::SampledLogprobs>());
}

void EngineDriver::on_prompt_logprobs(uint64_t request_id,
                                      std::span<const core::PromptTokenLogprobs> entries) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  it->second->stream->push_prompt_logprobs(entries);
}

void EngineDriver::on_finished(uint64_t request_id, core::FinishReason reason, double time) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  end_request(*it->second, finish_of(reason), time, {});
  finished_ids_.push_back(it->second->numeric_id);
  requests_.erase(it);
}

}  // namespace headway::serving
