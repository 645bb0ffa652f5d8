#include <fmt/format.h>
#include <headway/core/engine.h>
#include <headway/core/error.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <headway/sdk/model.hpp>
#include <limits>
#include <new>
#include <optional>

namespace headway::core {
namespace {

// 16.8 million blocks (268 million tokens in blocks of 16): far past any GPU node's KV, and about
// 500 MB of block tables on the host.
constexpr uint64_t kMaxKvBlocks = uint64_t{1} << 24;

uint32_t blocks_for(uint64_t tokens, uint32_t block_size) {
  return static_cast<uint32_t>((tokens + block_size - 1) / block_size);
}

}  // namespace

Engine::Engine(const EngineConfig& config, const DeploymentConfig& deployment,
               std::chrono::steady_clock::time_point wall_origin)
    : config_(config),
      clock_(std::make_unique<VirtualClock>()),
      model_host_(config.name + " model " + model_of(deployment, config).plugin->short_name(),
                  clock_.get()),
      scheduler_host_(config.name + " scheduler " + config.scheduler.plugin->short_name(),
                      clock_.get()),
      kv_(0) {
  const std::string config_dir =
      deployment.file.has_parent_path() ? deployment.file.parent_path().string() : std::string(".");
  model_ = std::make_unique<ModelInstance>(model_of(deployment, config), config_dir, model_host_);
  const hw_model_info& info = model_->info();
  // A real model runs on the wall clock; replace the provisional virtual clock before anything
  // has read it (the host services read through clock_ on every call).
  if (!info.reports_duration) {
    clock_ = std::make_unique<WallClock>(wall_origin);
    model_host_.set_clock(clock_.get());
    scheduler_host_.set_clock(clock_.get());
  }
  model_needs_ids_ = info.needs_token_ids != 0;

  const std::string where = deployment.file.string() + ": engines (" + config_.name + ")";
  max_model_len_ = info.max_model_len;
  if (config_.max_model_len != 0) {
    if (info.max_model_len != 0 && config_.max_model_len > info.max_model_len) {
      throw Error(fmt::format("{}: max_model_len {} exceeds the model's {}", where,
                              config_.max_model_len, info.max_model_len));
    }
    max_model_len_ = config_.max_model_len;
  }
  if (max_model_len_ == 0) throw Error(where + ": the model reports max_model_len 0");

  uint64_t blocks = config_.kv_blocks;
  const uint64_t capacity_blocks = info.kv_capacity_tokens / config_.block_size;
  // kv_blocks may only shrink the cache: more blocks than the model's memory holds is a simulation
  // of memory that is not there, or an allocation that fails (4294967295 blocks used to end in a
  // bare bad_alloc). The model's own memory option (kv_cache_gb, hbm_gb, ...) grows it.
  if (blocks != 0 && info.kv_capacity_tokens != 0 && blocks > capacity_blocks) {
    throw Error(fmt::format(
        "{}: kv_blocks {} exceeds the {} blocks of {} tokens ({} tokens) that the model's memory "
        "holds: lower kv_blocks, leave it 0 for all of them, or give the model more KV memory in "
        "its options",
        where, blocks, capacity_blocks, config_.block_size, info.kv_capacity_tokens));
  }
  if (blocks == 0) blocks = capacity_blocks;
  if (blocks > kMaxKvBlocks) {
    // The block tables cost about 30 bytes a block on the host: UINT32_MAX blocks would take the
    // process down with no word (a capacity given in bytes rather than tokens, say).
    throw Error(fmt::format(
        "{}: {} KV blocks of {} tokens ({}), more than the {} an engine manages: {}", where, blocks,
        config_.block_size,
        config_.kv_blocks != 0
            ? "kv_blocks"
            : fmt::format("model '{}' reports room for {} tokens (kv_capacity_tokens)",
                          model_->name(), info.kv_capacity_tokens),
        kMaxKvBlocks,
        config_.kv_blocks != 0 ? "lower kv_blocks"
                               : "set kv_blocks, or check that the model reports its capacity "
                                 "in tokens, not bytes"));
  }
  if (blocks == 0) {
    throw Error(
        fmt::format("{}: the model leaves no memory for the KV cache ({} tokens); set "
                    "kv_blocks or use more tensor parallelism",
                    where, info.kv_capacity_tokens));
  }
  blocks = std::min<uint64_t>(blocks, UINT32_MAX);
  // Like vLLM: a request that reaches max_model_len must fit in the cache on its own, or it could
  // preempt itself and never be readmitted.
  if (blocks * config_.block_size < max_model_len_) {
    throw Error(fmt::format(
        "{}: the KV cache holds {} tokens ({} blocks of {}), fewer than "
        "max_model_len {}: give it more room (the engine's kv_blocks, or the model's KV memory, "
        "such as the cpu and cuda models' kv_cache_gb) or lower max_model_len",
        where, blocks * config_.block_size, blocks, config_.block_size, max_model_len_));
  }
  try {
    kv_ = KvBlockManager(static_cast<uint32_t>(blocks));
    model_->init_kv(kv_.total(), config_.block_size);
  } catch (const std::bad_alloc&) {
    // A model that does not say how much memory it has (capacity 0) gets kv_blocks as given.
    throw Error(
        fmt::format("{}: cannot allocate a KV cache of {} blocks of {} tokens: lower "
                    "kv_blocks",
                    where, blocks, config_.block_size));
  } catch (const Error& e) {  // the model's init_kv refused: say which engine asked for what
    throw Error(fmt::format("{}: KV cache of {} blocks of {} tokens: {}", where, blocks,
                            config_.block_size, e.what()),
                e.code());
  }
  // Prefix caching's index is made when the first request with token ids comes (the ids name what
  // a cached block holds): a simulated model's requests have none unless their workload shares
  // beginnings, and then pay nothing for it.
  share_cached_blocks_ = config_.scheduler.plugin->descriptor->abi_minor >= 3;
  kv_memory_ = model_->kv_memory();
  if (kv_memory_.block_bytes == 0) {
    // A simulated model has no bytes behind its KV; transports still need the size of a block.
    kv_memory_.block_bytes = info.kv_bytes_per_token * config_.block_size;
    kv_memory_.block_stride = kv_memory_.block_bytes;
  }

  hw_engine_facts facts{sizeof(hw_engine_facts), config_.block_size, kv_.total(), max_model_len_,
                        config_.role};
  scheduler_ = std::make_unique<SchedulerInstance>(config_.scheduler, facts, scheduler_host_);
  // Steps allocate nothing once these hold every running request. A scheduler may declare no cap
  // worth the name (UINT32_MAX is legal): no more requests run than there are KV blocks to hold
  // their tokens, so that bounds the reservation (beyond it, a rare growth is one allocation).
  const size_t most_running = std::min<size_t>(scheduler_->limits().max_num_seqs, kv_.total());
  running_.reserve(most_running);
  running_views_.reserve(most_running);
}

void Engine::warn_of_rows_without_finite_logits() {
  const uint64_t rows = sampler_.rows_without_finite_best();
  uint64_t skipped = 0;  // steps with such rows since the last line: the count below covers them
  if (rows == rows_without_finite_warned_ || !finite_warnings_.due(skipped)) return;
  spdlog::warn(
      "{}: model '{}' gave {} logits row{} whose best logit is not finite (NaN, +inf, or -inf "
      "throughout) by step {}: those tokens mean nothing (token 0 where every logit is NaN); the "
      "model is broken, or a guided request's grammar allowed no token",
      config_.name, model_->name(), rows, rows == 1 ? "" : "s", step_index_);
  rows_without_finite_warned_ = rows;
}

Engine::~Engine() {
  // Plugin instances go before the host services they were created with.
  scheduler_.reset();
  model_.reset();
}

hw_request_view Engine::view_of(const Request& r) const {
  return hw_request_view{r.id,
                         r.state,
                         r.priority,
                         r.prompt_tokens,
                         r.output_tokens,
                         r.total(),
                         r.computed_tokens,
                         r.max_output_tokens,
                         static_cast<uint32_t>(r.blocks.size()),
                         r.arrival,
                         r.admission_order,
                         r.preemptions,
                         shared_blocks(r)};
}

uint32_t Engine::shared_blocks(const Request& r) const {
  // Nothing to count while no block has two owners (most steps of most workloads).
  if (!share_cached_blocks_ || kv_.shared() == 0) return 0;
  // Only blocks in its recorded chain can be shared: those are the ones the cache hands out.
  uint32_t shared = 0;
  const size_t chain = std::min<size_t>(r.recorded_blocks, r.blocks.size());
  for (size_t i = 0; i < chain; ++i) shared += kv_.ref_count(r.blocks[i]) > 1 ? 1 : 0;
  return shared;
}

uint32_t Engine::slot_of(uint64_t id) const {
  auto it = id_to_slot_.find(id);
  if (it == id_to_slot_.end()) {
    throw Error(fmt::format("{}: request {} is not in this engine", config_.name, id), HW_INTERNAL);
  }
  return it->second;
}

uint32_t Engine::occupy_slot(IncomingTransfer in, int32_t state) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(requests_.size());
    requests_.emplace_back();
  }
  Request& r = requests_[slot];
  r.id = in.id;
  r.class_index = in.class_index;
  r.priority = in.priority;
  r.state = state;
  r.prompt_tokens = in.prompt_tokens;
  r.output_tokens = in.output_tokens;
  r.computed_tokens = in.computed_tokens;
  r.max_output_tokens = std::min<uint32_t>(in.max_output_tokens, max_model_len_ - in.prompt_tokens);
  r.arrival = in.arrival;
  r.admission_order = 0;
  r.preemptions = 0;
  r.preemptions_without_token = 0;
  r.token_step_seen = tokens_sampled_steps_;
  r.sampling = std::move(in.sampling);
  r.tokens = std::move(in.tokens);
  // Capacity for everything the request may hold, so that its steps never allocate. A request
  // with ids keeps its outputs' too, even where the model reads none (a simulated one): the
  // prefix cache then holds its answer, which a conversation's next turn begins with.
  // An answer that ends by itself (a workload's, NewRequest::ends_after_outputs) produces no more.
  if (model_needs_ids_ || !r.tokens.empty()) {
    const uint32_t outputs = in.ends_after_outputs != 0
                                 ? std::min(r.max_output_tokens, in.ends_after_outputs)
                                 : r.max_output_tokens;
    r.tokens.reserve(r.prompt_tokens + outputs);
  }
  r.blocks.clear();
  r.blocks.reserve(blocks_for(r.prompt_tokens + r.max_output_tokens, config_.block_size));
  r.forget_chain();
  r.arrived_cached_blocks = 0;
  if (prefix_cache_ != nullptr && !r.tokens.empty()) r.cached_prefix.reserve(r.blocks.capacity());
  r.record = in.record;
  r.in_use = true;
  r.prefill_only = false;
  r.catching_up = false;
  r.ends_after_outputs = in.ends_after_outputs;
  r.outputs_before = 0;
  r.prompt_logprobs_next = 1;
  if (r.record != nullptr) {
    r.record->id = r.id;
    r.record->class_index = r.class_index;
    r.record->engine = config_.index;
    r.record->prompt_tokens = r.prompt_tokens;
    if (std::isnan(r.record->arrival)) r.record->arrival = r.arrival;
    // As many as it will produce: a simulated answer that ends by itself may ask for far more.
    const uint32_t outputs = r.ends_after_outputs != 0
                                 ? std::min(r.max_output_tokens, r.ends_after_outputs)
                                 : r.max_output_tokens;
    r.record->token_times.reserve(outputs);
    r.record->token_ids.reserve(outputs);
  }
  id_to_slot_.emplace(r.id, slot);
  return slot;
}

void Engine::add_request(NewRequest request) {
  const std::string who = fmt::format("{}: request {}", config_.name, request.id);
  if (!request.prompt.empty()) request.prompt_tokens = static_cast<uint32_t>(request.prompt.size());
  if (request.prompt_tokens == 0) throw Error(who + ": empty prompt");
  if (model_needs_ids_ && request.prompt.empty()) {
    throw Error(who + ": this model needs prompt token ids");
  }
  if (request.max_output_tokens == 0) throw Error(who + ": max_output_tokens must be at least 1");
  if (request.prompt_tokens >= max_model_len_) {
    throw Error(
        fmt::format("{}: prompt of {} tokens leaves no room for output within "
                    "max_model_len {}",
                    who, request.prompt_tokens, max_model_len_));
  }
  // Refused, not cut short: `headway serve` refuses such a request before it reaches an engine
  // (as vLLM does), so a simulated run that served it with fewer tokens would report outputs the
  // workload did not ask for, and figures a served run would not see.
  if (!fits(request.prompt_tokens, request.max_output_tokens)) {
    throw Error(fmt::format("{}: {} prompt tokens and {} output tokens exceed max_model_len {}",
                            who, request.prompt_tokens, request.max_output_tokens, max_model_len_));
  }
  if (blocks_for(request.prompt_tokens + 1ull, config_.block_size) > kv_.total()) {
    throw Error(fmt::format("{}: prompt of {} tokens needs more KV blocks than the engine has ({})",
                            who, request.prompt_tokens, kv_.total()),
                HW_RESOURCE_EXHAUSTED);
  }
  if (id_to_slot_.count(request.id) != 0) throw Error(who + ": duplicate request id");
  check_sampling(who, request.sampling);
  if (config_.max_waiting != 0 && waiting_size() >= config_.max_waiting) {
    throw Error(fmt::format("{}: waiting queue is full ({} requests)", who, config_.max_waiting),
                HW_RESOURCE_EXHAUSTED);
  }

  if (config_.prefix_caching && prefix_cache_ == nullptr && !request.prompt.empty()) {
    start_prefix_cache();
  }
  const uint32_t slot =
      occupy_slot(IncomingTransfer{request.id, request.class_index, request.prompt_tokens, 0, 0,
                                   request.max_output_tokens, request.priority, request.arrival,
                                   std::move(request.sampling), std::move(request.prompt),
                                   request.record, request.ends_after_outputs},
                  HW_REQUEST_WAITING);
  Request& r = requests_[slot];
  r.prefill_only = request.prefill_only;
  r.outputs_before = request.outputs_before;
  waiting_.push_back(view_of(r));
  waiting_prompt_tokens_ += r.prompt_tokens;
  count_waiting_priority(r.priority, +1);
  waiting_output_tokens_ += r.max_output_tokens;
}

void Engine::push_waiting_front(const Request& r) {
  ++pushed_front_since_match_;
  if (waiting_head_ > 0) {
    waiting_[--waiting_head_] = view_of(r);
  } else {
    waiting_.insert(waiting_.begin(), view_of(r));
  }
  waiting_prompt_tokens_ += r.total() - r.computed_tokens;
  waiting_output_tokens_ += r.max_output_tokens - r.output_tokens;
  count_waiting_priority(r.priority, +1);
}

void Engine::push_waiting_after_moved(const Request& r) {
  // The requests at the head that hold moved KV (complete_transfer() queues them there): each can
  // take its next step without a new block. A preempted request in front of them would, under
  // an FCFS scheduler, be readmitted, fill its step with a chunk of its recompute, find no block
  // for the next chunk while they hold theirs, and preempt itself again, for ever.
  size_t at = waiting_head_;
  while (at < waiting_.size() && waiting_[at].blocks_held > 0) ++at;
  if (at == waiting_head_) {
    push_waiting_front(r);
    return;
  }
  ++pushed_front_since_match_;  // every entry behind it moves one place later
  if (waiting_head_ > 0) {
    const auto first = waiting_.begin() + static_cast<ptrdiff_t>(waiting_head_);
    std::move(first, waiting_.begin() + static_cast<ptrdiff_t>(at), first - 1);
    --waiting_head_;
    waiting_[at - 1] = view_of(r);
  } else {
    waiting_.insert(waiting_.begin() + static_cast<ptrdiff_t>(at), view_of(r));
  }
  waiting_prompt_tokens_ += r.total() - r.computed_tokens;
  waiting_output_tokens_ += r.max_output_tokens - r.output_tokens;
  count_waiting_priority(r.priority, +1);
}

void Engine::remove_admitted_from_waiting(size_t admitted) {
  // Whether the entry leaves the queue, and whether it is one the step admitted (a request that
  // is gone from the engine leaves too, though abort() takes its entry out already).
  auto leaves = [this](const hw_request_view& v, bool& was_admitted) {
    auto it = id_to_slot_.find(v.id);
    was_admitted = it != id_to_slot_.end() && requests_[it->second].state != HW_REQUEST_WAITING;
    return was_admitted || it == id_to_slot_.end();
  };
  bool was_admitted = false;
  // Plans admit from the head of the queue in the common case: advancing the head is O(admitted).
  while (admitted > 0 && waiting_head_ < waiting_.size() &&
         leaves(waiting_[waiting_head_], was_admitted)) {
    ++waiting_head_;
    admitted -= was_admitted ? 1 : 0;
  }
  // The others (a plan that took requests from further back) are looked for only until all are
  // found: a look-up for every request queued, on every step that admits, grew the step with the
  // queue (helper-204's review; engine_step_benchmark).
  if (admitted > 0) {
    size_t kept = waiting_head_;
    size_t read = waiting_head_;
    for (; read < waiting_.size() && admitted > 0; ++read) {
      if (leaves(waiting_[read], was_admitted)) {
        admitted -= was_admitted ? 1 : 0;
      } else {
        waiting_[kept++] = waiting_[read];
      }
    }
    waiting_.erase(waiting_.begin() + static_cast<ptrdiff_t>(kept),
                   waiting_.begin() + static_cast<ptrdiff_t>(read));
  }
  // Reclaim the consumed prefix once it dominates, so the vector does not grow without bound.
  if (waiting_head_ > 1024 && waiting_head_ * 2 > waiting_.size()) {
    waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<ptrdiff_t>(waiting_head_));
    waiting_head_ = 0;
  }
}

void Engine::preempt(uint32_t slot) {
  Request& r = requests_[slot];
  kv_.release(r.blocks);
  r.forget_chain();
  r.computed_tokens = 0;
  r.state = HW_REQUEST_WAITING;
  ++r.preemptions;
  if (r.token_step_seen != tokens_sampled_steps_) {
    r.token_step_seen = tokens_sampled_steps_;
    r.preemptions_without_token = 0;
  }
  if (++r.preemptions_without_token > livelock_bound() && livelocked_count_ == 0) {
    livelocked_id_ = r.id;
    livelocked_count_ = r.preemptions_without_token;
  }
  if (!r.catching_up) ++catching_up_;
  r.catching_up = true;
  if (r.record != nullptr) ++r.record->preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), slot));
  push_waiting_after_moved(r);
  ++counters_.preemptions;
}

void Engine::release_slot(uint32_t slot) {
  Request& r = requests_[slot];
  if (!r.blocks.empty()) kv_.release(r.blocks);
  if (r.catching_up) --catching_up_;
  r.catching_up = false;
  id_to_slot_.erase(r.id);
  r.in_use = false;
  r.record = nullptr;
  r.sampling.guide.reset();  // its cached masks go now, not when the slot is reused
  free_slots_.push_back(slot);
}

void Engine::finish(uint32_t slot, FinishReason reason, double time) {
  Request& r = requests_[slot];
  r.state = reason == FinishReason::kAborted ? HW_REQUEST_ABORTED : HW_REQUEST_FINISHED;
  if (r.record != nullptr) {
    r.record->finish = time;
    r.record->finished = reason != FinishReason::kAborted;
    r.record->output_tokens = r.output_tokens;
  }
  if (reason == FinishReason::kAborted) {
    ++counters_.aborted;
  } else {
    ++counters_.finished;
  }
  uint64_t id = r.id;
  release_slot(slot);
  if (listener_ != nullptr) listener_->on_finished(id, reason, time);
}

bool Engine::abort(uint64_t request_id) {
  auto it = id_to_slot_.find(request_id);
  if (it == id_to_slot_.end()) return false;
  uint32_t slot = it->second;
  Request& r = requests_[slot];
  if (r.state == HW_REQUEST_TRANSFERRING) {
    // Held for (or by) a KV transfer: in no queue here; the cluster cancels the transfer.
    prefilled_.erase(std::remove(prefilled_.begin(), prefilled_.end(), request_id),
                     prefilled_.end());
  } else if (r.state == HW_REQUEST_WAITING) {
    auto pos =
        std::find_if(waiting_.begin() + static_cast<ptrdiff_t>(waiting_head_), waiting_.end(),
                     [&](const hw_request_view& v) { return v.id == request_id; });
    if (pos != waiting_.end()) waiting_.erase(pos);
    waiting_prompt_tokens_ -= r.total() - r.computed_tokens;
    waiting_output_tokens_ -= r.max_output_tokens - r.output_tokens;
    count_waiting_priority(r.priority, -1);
  } else {
    running_.erase(std::find(running_.begin(), running_.end(), slot));
  }
  finish(slot, FinishReason::kAborted, clock_->now());
  return true;
}

bool Engine::step() {
  if (!has_work()) return false;
  const double start = clock_->now();
  const hw_scheduler_limits& limits = scheduler_->limits();

  running_views_.clear();
  for (uint32_t slot : running_) running_views_.push_back(view_of(requests_[slot]));
  if (prefix_cache_ != nullptr) match_cached_prefixes();
  const size_t waiting_count = waiting_size();
  const size_t capacity = running_.size() + waiting_count;

  hw_scheduler_snapshot snapshot{sizeof(hw_scheduler_snapshot),
                                 step_index_,
                                 start,
                                 running_views_.data(),
                                 static_cast<uint32_t>(running_views_.size()),
                                 waiting_.data() + waiting_head_,
                                 static_cast<uint32_t>(waiting_count),
                                 kv_.free(),
                                 kv_.total(),
                                 config_.block_size,
                                 max_model_len_};
  hw_scheduler_plan plan =
      plan_arrays_.plan(static_cast<uint32_t>(capacity), static_cast<uint32_t>(running_.size()));
  try {
    scheduler_->schedule(snapshot, plan);
  } catch (const Error& e) {
    // The plugin's message names the scheduler; the engine and the step say where it happened.
    throw Error(fmt::format("{}: step {}: {}", config_.name, step_index_, e.what()), e.code());
  }
  if (const std::optional<std::string> past = plan_arrays_.overrun()) {
    throw PluginContractError(
        fmt::format("{}: scheduler '{}' wrote past the plan's {} at step {}: a plugin writes no "
                    "entry past a capacity (abi.h)",
                    config_.name, scheduler_->name(), *past, step_index_),
        HW_INTERNAL);
  }
  if (auto broken = validator_.validate(snapshot, plan, limits)) {
    throw Error(fmt::format("{}: scheduler '{}' returned an invalid plan at step {} (not "
                            "executed): {}",
                            config_.name, scheduler_->name(), step_index_, *broken),
                HW_INTERNAL);
  }
  if (plan.slice_count == 0 && plan.preempted_count == 0) return false;

  detail_.preempted.clear();
  for (uint32_t i = 0; i < plan.preempted_count; ++i) {
    preempt(slot_of(plan.preempted[i]));
    detail_.preempted.push_back(plan.preempted[i]);
  }

  // Cached prefixes first: the allocations below may evict idle cached blocks.
  detail_.prefix_queried_tokens = 0;
  detail_.prefix_hit_tokens = 0;
  if (prefix_cache_ != nullptr) {
    for (uint32_t i = 0; i < plan.slice_count; ++i) {
      Request& r = requests_[slot_of(plan.slices[i].request_id)];
      if (r.state == HW_REQUEST_WAITING && r.blocks.empty()) take_cached_prefix(r);
    }
  }

  model_slices_.clear();
  slice_slots_.clear();
  detail_.slices.clear();
  detail_.slice_is_decode.clear();
  detail_.slice_samples.clear();
  uint32_t prefill_tokens = 0;
  uint32_t decode_tokens = 0;
  size_t admitted = 0;
  for (uint32_t i = 0; i < plan.slice_count; ++i) {
    const hw_slice& s = plan.slices[i];
    const uint32_t slot = slot_of(s.request_id);
    Request& r = requests_[slot];
    if (r.state == HW_REQUEST_WAITING) {
      r.state = HW_REQUEST_PREFILLING;
      r.admission_order = next_admission_++;
      running_.push_back(slot);
      waiting_prompt_tokens_ -= r.total() - r.computed_tokens;
      waiting_output_tokens_ -= r.max_output_tokens - r.output_tokens;
      count_waiting_priority(r.priority, -1);
      ++admitted;
      if (r.record != nullptr && std::isnan(r.record->scheduled)) r.record->scheduled = start;
    }
    const uint32_t need =
        blocks_for(static_cast<uint64_t>(r.computed_tokens) + s.tokens, config_.block_size);
    if (need > r.blocks.size() &&
        !kv_.allocate(need - static_cast<uint32_t>(r.blocks.size()), r.blocks)) {
      throw Error(
          fmt::format("{}: KV allocation failed after validation (request {})", config_.name, r.id),
          HW_INTERNAL);
    }
    const bool is_decode =
        r.output_tokens > 0 && s.tokens == 1 && r.computed_tokens + 1 == r.total();
    (is_decode ? decode_tokens : prefill_tokens) += s.tokens;
    const bool sample = r.computed_tokens + s.tokens == r.total();
    model_slices_.push_back(hw_model_slice{
        r.id, s.start, s.tokens, model_needs_ids_ ? r.tokens.data() + s.start : nullptr,
        r.blocks.data(), static_cast<uint32_t>(r.blocks.size()), sample ? 1 : 0,
        r.sampling.temperature, r.sampling.top_p, r.sampling.seed,
        r.outputs_before + r.output_tokens, r.sampling.top_k, r.sampling.min_p,
        r.reports_prompt_in(s.start, s.tokens) ? 1u : 0u});
    slice_slots_.push_back(slot);
    detail_.slices.push_back(s);
    detail_.slice_is_decode.push_back(is_decode ? 1 : 0);
    detail_.slice_samples.push_back(sample ? 1 : 0);
  }
  if (admitted > 0) remove_admitted_from_waiting(admitted);

  // The forward pass: no lock is held and nothing is allocated around it (buffers grow only when
  // a step is larger than any before).
  int32_t* const sampled = sampled_.prepare(model_slices_.size());
  const hw_model_info& info = model_->info();
  // Which sampling slices the host samples from a row: all of them when the model returns logits;
  // on a model that returns them on request, those of requests that need the host's processing
  // (check_sampling() admitted no such request on a model that does neither).
  const bool rows_on_request = info.returns_logits == 0 && info.returns_logits_on_request != 0;
  bool any_on_request = false;
  host_samples_.assign(model_slices_.size(), 0);
  for (size_t i = 0; i < model_slices_.size(); ++i) {
    if (model_slices_[i].sample == 0) continue;
    const bool host =
        info.returns_logits != 0 ||
        (rows_on_request && requests_[slice_slots_[i]].sampling.uses_host_processing());
    host_samples_[i] = host ? 1 : 0;
    any_on_request = any_on_request || (host && rows_on_request);
  }
  hw_model_batch batch{sizeof(hw_model_batch), model_slices_.data(),
                       static_cast<uint32_t>(model_slices_.size()), config_.block_size,
                       any_on_request ? host_samples_.data() : nullptr};
  hw_model_output output{sizeof(hw_model_output), sampled, 0.0, nullptr, 0, 0};
  uint32_t logit_rows = 0;
  if (info.returns_logits != 0 || rows_on_request) {
    // Room for the rows, and for the top tokens of every prompt figure first, so that the
    // figures' spans into prompt_top_ stay valid.
    size_t prompt_top_needed = 0;
    for (size_t i = 0; i < model_slices_.size(); ++i) {
      const hw_model_slice& m = model_slices_[i];
      logit_rows += sdk::logits_rows(m, host_samples_[i] != 0);
      if (m.all_logits == 0) continue;
      const int32_t asked = requests_[slice_slots_[i]].sampling.prompt_logprobs;
      prompt_top_needed +=
          size_t{m.tokens} * std::min<uint32_t>(static_cast<uint32_t>(asked), info.vocab);
    }
    if (prompt_top_.size() < prompt_top_needed) prompt_top_.resize(prompt_top_needed);
    const size_t needed = static_cast<size_t>(logit_rows) * info.vocab;
    if (logits_.size() < needed) logits_.resize(needed);
    output.logits = logits_.data();
    output.logits_rows = logit_rows;
    output.vocab = info.vocab;
  }
  if (!model_slices_.empty()) {
    try {
      model_->forward(batch, output);
    } catch (const Error& e) {  // as for the scheduler: the engine and the step say where
      // (ModelInstance::forward() also checks the rows written against those asked for.)
      throw Error(fmt::format("{}: step {}: {}", config_.name, step_index_, e.what()), e.code());
    }
    if (!sampled_.guard_intact()) {
      throw PluginContractError(
          fmt::format("{}: step {}: model '{}' forward() wrote hw_model_output.sampled[{}], "
                      "past the batch's slices (one id per slice, abi.h)",
                      config_.name, step_index_, model_->name(), sampled_.capacity()),
          HW_INTERNAL);
    }
  }
  prompt_begin_.assign(model_slices_.size() + 1, 0);
  if (logit_rows > 0) {
    // Sampling in the core, shared by every model that returns logits.
    uint32_t row = 0;  // the slice's first row
    uint32_t top_used = 0;
    size_t prompt_top_used = 0;
    prompt_figures_.clear();
    if (slice_logprobs_.size() < model_slices_.size()) slice_logprobs_.resize(model_slices_.size());
    for (size_t i = 0; i < model_slices_.size(); ++i) {
      const hw_model_slice& m = model_slices_[i];
      if (m.all_logits != 0)
        read_prompt_figures(requests_[slice_slots_[i]], m, row, prompt_top_used);
      prompt_begin_[i + 1] = static_cast<uint32_t>(prompt_figures_.size());
      row += sdk::logits_rows(m, host_samples_[i] != 0);
      if (host_samples_[i] == 0) continue;  // not sampled, or sampled on the device
      const Request& r = requests_[slice_slots_[i]];
      // The slice's last row is the one to sample from.
      std::span<float> logits(logits_.data() + static_cast<size_t>(row - 1) * info.vocab,
                              info.vocab);
      const uint32_t generated = r.outputs_before + r.output_tokens;
      SamplingHistory history;
      history.eos_token = info.eos_token;
      if (r.sampling.reads_outputs() && r.tokens.size() >= generated) {
        // tokens is the prompt, then every output (those of an earlier engine included).
        const std::span<const int32_t> all(r.tokens);
        history.prompt = all.first(all.size() - generated);
        history.outputs = all.last(generated);
      }
      const bool wants_logprobs = r.sampling.logprobs >= 0;
      // The guide's mask first: as in vLLM, whose grammar bitmask changes the logits before its
      // sampler reads them, a token the guide forbids is not a candidate and the one it forces
      // has probability 1. The sampler then uses the row as scratch; the log-probabilities are
      // those of the logits before temperature, penalties and logit_bias.
      if (r.sampling.guide) r.sampling.guide->mask(logits);
      if (wants_logprobs) raw_logits_.assign(logits.begin(), logits.end());
      sampled_[i] = sampler_.sample(logits, r.sampling, generated, history);
      if (wants_logprobs) {
        const uint32_t count =
            std::min<uint32_t>(static_cast<uint32_t>(r.sampling.logprobs), info.vocab);
        if (logprob_top_.size() < top_used + count) logprob_top_.resize(top_used + count);
        const float logprob = logprob_calculator_.compute(
            raw_logits_, sampled_[i], std::span(logprob_top_).subspan(top_used, count));
        slice_logprobs_[i] = SliceLogprobs{logprob, top_used, count};
        top_used += count;
      }
    }
  }
  warn_of_rows_without_finite_logits();
  // A plan that only preempts runs no forward pass: nothing to time.
  if (clock_->is_virtual() && !model_slices_.empty()) {
    // A step of 0 s would make every latency 0 and the throughput infinite: a cost model's bug.
    if (!std::isfinite(output.seconds) || output.seconds <= 0.0) {
      throw Error(fmt::format("{}: model '{}' reported an invalid step duration {} (a step on the "
                              "virtual clock takes a finite time above 0 s)",
                              config_.name, model_->name(), output.seconds),
                  HW_INTERNAL);
    }
    clock_->advance(output.seconds);
  }
  const double end = clock_->now();

  const uint32_t eos = model_->info().eos_token;
  bool sampled_any = false;
  for (size_t i = 0; i < model_slices_.size(); ++i) {
    const uint32_t slot = slice_slots_[i];
    Request& r = requests_[slot];
    r.computed_tokens += model_slices_[i].tokens;
    if (prefix_cache_ != nullptr) record_full_blocks(r);
    if (listener_ != nullptr && prompt_begin_[i + 1] > prompt_begin_[i]) {
      listener_->on_prompt_logprobs(
          r.id, std::span(prompt_figures_)
                    .subspan(prompt_begin_[i], prompt_begin_[i + 1] - prompt_begin_[i]));
    }
    if (!model_slices_[i].sample) {
      r.state = HW_REQUEST_PREFILLING;
      continue;
    }
    const int32_t token = sampled_[i];
    sampled_any = true;
    if (r.catching_up) {  // recomputed what its preemption dropped: it decodes again
      --catching_up_;
      r.catching_up = false;
    }
    // The guide masked every token it does not allow, so it takes this one.
    if (r.sampling.guide) r.sampling.guide->accept(token);
    ++r.output_tokens;
    r.state = HW_REQUEST_DECODING;
    if (model_needs_ids_ || !r.tokens.empty()) r.tokens.push_back(token);
    if (r.record != nullptr) {
      if (r.output_tokens == 1) r.record->first_token = end;
      r.record->token_times.push_back(end);
      r.record->token_ids.push_back(token);
      r.record->output_tokens = r.output_tokens;
    }
    if (listener_ != nullptr) {
      if (r.sampling.logprobs >= 0 && host_samples_[i] != 0) {
        const SliceLogprobs& figures = slice_logprobs_[i];
        const SampledLogprobs logprobs{
            figures.logprob, std::span(logprob_top_).subspan(figures.top_begin, figures.top_count)};
        listener_->on_token(r.id, token, end, &logprobs);
      } else {
        listener_->on_token(r.id, token, end, nullptr);
      }
    }
    const bool stop = is_stop_token(r, token, eos) ||
                      (r.ends_after_outputs != 0 && r.output_tokens >= r.ends_after_outputs);
    if (stop) {
      finish(slot, FinishReason::kStop, end);
    } else if (r.output_tokens >= r.max_output_tokens || r.total() >= max_model_len_) {
      finish(slot, FinishReason::kLength, end);
    } else if (r.prefill_only) {
      // Its prefill is done here; it waits with its blocks until the cluster moves them.
      r.state = HW_REQUEST_TRANSFERRING;
      prefilled_.push_back(r.id);
    }
    if (r.prefill_only && !r.in_use) prefill_only_finished_.push_back(r.id);
  }
  // Drop finished and departing requests from the running list, keeping admission order.
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [this](uint32_t slot) {
                                  return !requests_[slot].in_use ||
                                         requests_[slot].state == HW_REQUEST_TRANSFERRING;
                                }),
                 running_.end());

  detail_.step = step_index_;
  detail_.start = start;
  detail_.duration = end - start;
  detail_.prefill_tokens = prefill_tokens;
  detail_.decode_tokens = decode_tokens;
  detail_.kv_blocks_used = kv_.used();
  ++counters_.steps;
  counters_.prefill_tokens += prefill_tokens;
  counters_.decode_tokens += decode_tokens;
  counters_.busy_seconds += end - start;
  ++step_index_;
  if (sampled_any) ++tokens_sampled_steps_;
  if (livelocked_count_ > 0) throw livelock();
  return true;
}

Error Engine::livelock() const {
  return Error(fmt::format("{}: scheduler '{}' preempted request {} {} times without a token "
                           "sampled on the engine meanwhile, by step {}: it keeps readmitting and "
                           "preempting it without progress (a livelock); the engine stops rather "
                           "than run for ever",
                           config_.name, scheduler_->name(), livelocked_id_, livelocked_count_,
                           step_index_ - 1),
               HW_INTERNAL);
}

void Engine::keep_kv_events() {
  if (!config_.prefix_caching || kv_events_ != nullptr) return;
  if (prefix_cache_ != nullptr && prefix_cache_->entries() != 0) {
    throw Error(fmt::format("{}: KV events are asked for after its prefix cache recorded blocks",
                            config_.name),
                HW_INTERNAL);
  }
  // Room for every block's piece to be stored and removed twice between two reads, which at one
  // read per routed request is far more than a step between them evicts.
  kv_events_ = std::make_unique<KvEventLog>(4 * size_t{kv_.total()} + 64);
  if (prefix_cache_ != nullptr) prefix_cache_->report_to(kv_events_.get());
}

void Engine::start_prefix_cache() {
  try {
    prefix_cache_ = std::make_unique<PrefixCache>(kv_, config_.block_size);
    prefix_cache_->report_to(kv_events_.get());
    claimed_in_round_.assign(kv_.total(), 0);
  } catch (const std::bad_alloc&) {
    kv_.set_eviction_listener({});  // it pointed into the index
    prefix_cache_.reset();
    throw Error(
        fmt::format("{}: cannot allocate the prefix cache's index for {} KV blocks of {} "
                    "tokens: set prefix_caching = false for this engine, or lower kv_blocks",
                    config_.name, kv_.total(), config_.block_size),
        HW_RESOURCE_EXHAUSTED);
  }
}

void Engine::count_waiting_priority(int32_t priority, int delta) {
  auto it = std::find_if(waiting_priorities_.begin(), waiting_priorities_.end(),
                         [&](const auto& entry) { return entry.first == priority; });
  if (it == waiting_priorities_.end()) {
    // A value not seen before: the list grows with the values a deployment's clients use.
    waiting_priorities_.emplace_back(priority, 0);
    it = waiting_priorities_.end() - 1;
  }
  if (delta > 0 && it->second++ == 0) ++waiting_priorities_in_use_;
  if (delta < 0 && --it->second == 0) --waiting_priorities_in_use_;
}

void Engine::match_cached_prefixes() {
  // A round per call, not per step: a call whose plan turns out empty does not advance the step.
  const uint64_t round = ++match_round_;
  // As many as could run from the head of the queue, so that a long queue costs a step nothing
  // more: a request the scheduler admits from further back computes its beginning.
  const size_t scan_size = std::max<size_t>(kMinPrefixScan, scheduler_->limits().max_num_seqs);
  const size_t scan_end = std::min(waiting_.size(), waiting_head_ + scan_size);
  // Without sharing, a block another request holds is not taken (the scheduler would count it as
  // freed by preempting either), and one waiting request claims a block per step.
  const auto can_take = [&](uint32_t block) {
    return share_cached_blocks_ || (kv_.is_idle_cached(block) && claimed_in_round_[block] != round);
  };
  const auto forget_match = [&](hw_request_view& view) {
    if (view.blocks_held == 0 && view.computed_tokens != 0) {
      requests_[slot_of(view.id)].cached_prefix.clear();
      view.computed_tokens = 0;
    }
  };
  int32_t least_urgent_scanned = std::numeric_limits<int32_t>::min();
  for (size_t w = waiting_head_; w < scan_end; ++w) {
    least_urgent_scanned = std::max(least_urgent_scanned, waiting_[w].priority);
  }
  if (waiting_priorities_in_use_ > 1 && scan_end < waiting_.size()) {
    // Requests differ in priority: a priority policy admits the most urgent from anywhere in the
    // queue, which the head alone missed (with policy = "priority", 95% of a run's reuse;
    // helper-206). As many of those behind the head that are more urgent than some in it are
    // matched too (the others come after the whole head in a priority order as well), at the
    // cost of a pass over the queue (the policy makes its own order each step). The others'
    // matches are no longer kept up to date.
    const size_t chosen = order_waiting_by_urgency(scan_end, least_urgent_scanned, scan_size);
    for (size_t i = chosen; i < prefix_scan_.size(); ++i) forget_match(waiting_[prefix_scan_[i]]);
    // Head and chosen in one order, the most urgent first: without sharing, the first matched
    // claims an idle block, and a priority policy admits the most urgent first.
    prefix_scan_.resize(chosen);
    for (size_t w = waiting_head_; w < scan_end; ++w) prefix_scan_.push_back(w);
    std::sort(prefix_scan_.begin(), prefix_scan_.end(),
              [this](size_t a, size_t b) { return waits_more_urgently(a, b); });
    for (const size_t w : prefix_scan_) match_waiting_entry(waiting_[w], round, can_take);
    pushed_front_since_match_ = 0;
    matched_by_urgency_ = true;
    return;
  }
  for (size_t w = waiting_head_; w < scan_end; ++w) {
    match_waiting_entry(waiting_[w], round, can_take);
  }
  // Entries matched before that preempted requests pushed past the end of the scan, or anywhere
  // when the last match went by urgency, are cleared.
  const size_t stale_end = matched_by_urgency_
                               ? waiting_.size()
                               : std::min(waiting_.size(), scan_end + pushed_front_since_match_);
  for (size_t w = scan_end; w < stale_end; ++w) forget_match(waiting_[w]);
  pushed_front_since_match_ = 0;
  matched_by_urgency_ = false;
}

size_t Engine::order_waiting_by_urgency(size_t from, int32_t less_urgent, size_t count) {
  prefix_scan_.clear();
  size_t candidates = 0;
  for (size_t w = from; w < waiting_.size(); ++w) {
    if (waiting_[w].blocks_held != 0) continue;  // its KV was moved here: nothing to match
    prefix_scan_.push_back(w);
    // The candidates first, then the rest (whose matches are forgotten).
    if (waiting_[w].priority < less_urgent) {
      std::swap(prefix_scan_[candidates++], prefix_scan_.back());
    }
  }
  const size_t chosen = std::min(count, candidates);
  const auto first = prefix_scan_.begin();
  std::nth_element(first, first + static_cast<ptrdiff_t>(chosen),
                   first + static_cast<ptrdiff_t>(candidates),
                   [this](size_t a, size_t b) { return waits_more_urgently(a, b); });
  return chosen;
}

bool Engine::waits_more_urgently(size_t a, size_t b) const {
  if (waiting_[a].priority != waiting_[b].priority) {
    return waiting_[a].priority < waiting_[b].priority;
  }
  return a < b;
}

template <class CanTake>
void Engine::match_waiting_entry(hw_request_view& view, uint64_t round, const CanTake& can_take) {
  Request& r = requests_[slot_of(view.id)];
  if (!r.blocks.empty()) return;  // its KV was moved here and is held already
  const uint32_t block_size = config_.block_size;
  // The last token is always computed: its logits give the next token. A simulated model's
  // request knows the ids of its prompt only.
  // A position whose next token's figures are still to be reported must be computed.
  const size_t must_compute_from = r.reports_prompt() ? r.prompt_logprobs_next - 1 : r.total() - 1;
  const uint32_t most = static_cast<uint32_t>(
      std::min({size_t{r.total() - 1}, r.tokens.size(), must_compute_from}) / block_size);
  // The match of the steps before stands up to its first block evicted since (a block's
  // generation changes with each eviction) or, without sharing, not to be taken now: checking
  // costs a comparison per block, where finding it again hashes and compares its ids; and
  // nothing, with sharing, when nothing was evicted since.
  size_t kept = std::min<size_t>(r.cached_prefix.size(), most);
  if (!share_cached_blocks_ || r.matched_at_evictions != kv_.evictions()) {
    kept = 0;
    while (kept < r.cached_prefix.size() && kept < most &&
           kv_.generation(r.cached_prefix[kept].block) == r.cached_prefix[kept].generation &&
           can_take(r.cached_prefix[kept].block)) {
      claimed_in_round_[r.cached_prefix[kept].block] = round;
      ++kept;
    }
  }
  r.cached_prefix.resize(kept);
  r.matched_at_evictions = kv_.evictions();
  // Then blocks recorded since, after it.
  extend_cached_run(r.tokens, most, r.cached_prefix, [&](uint32_t block) {
    if (!can_take(block)) return false;
    claimed_in_round_[block] = round;
    return true;
  });
  view.computed_tokens = static_cast<uint32_t>(r.cached_prefix.size()) * block_size;
}

void Engine::take_cached_prefix(Request& r) {
  if (r.tokens.empty()) return;  // no ids, nothing to look up
  counters_.prefix_cache_queried_tokens += r.total();
  detail_.prefix_queried_tokens += r.total();
  if (r.cached_prefix.empty()) return;
  // A match kept from an earlier step must have been checked since (match_cached_prefixes): a
  // block evicted meanwhile holds other tokens' KV, which the request would attend to. All are
  // checked before any is taken, so that the books stay whole when one fails.
  for (const PrefixCache::Link& link : r.cached_prefix) {
    if (kv_.generation(link.block) != link.generation) {
      throw Error(fmt::format("{}: request {} was admitted with a cached beginning whose block {} "
                              "was evicted since it was looked up (an engine bug)",
                              config_.name, r.id, link.block),
                  HW_INTERNAL);
    }
  }
  for (const PrefixCache::Link& link : r.cached_prefix) {
    kv_.take_cached(link.block, r.blocks);
    prefix_cache_->report_taken(link.block);
  }
  const uint32_t hit = static_cast<uint32_t>(r.cached_prefix.size()) * config_.block_size;
  // Admission subtracts what is left to compute from the waiting totals; these are not.
  waiting_prompt_tokens_ -= hit;
  r.computed_tokens = hit;
  r.recorded_blocks = static_cast<uint32_t>(r.cached_prefix.size());
  r.chain = r.cached_prefix.back();
  r.cached_prefix.clear();
  if (r.record != nullptr && std::isnan(r.record->scheduled)) r.record->cached_tokens = hit;
  counters_.prefix_cache_hit_tokens += hit;
  detail_.prefix_hit_tokens += hit;
}

void Engine::record_full_blocks(Request& r) {
  if (r.chain_lost) return;
  const uint32_t block_size = config_.block_size;
  const uint32_t full =
      static_cast<uint32_t>(std::min<size_t>(r.computed_tokens, r.tokens.size()) / block_size);
  const std::span<const int32_t> tokens(r.tokens);
  for (; r.recorded_blocks < full; ++r.recorded_blocks) {
    const std::optional<PrefixCache::Link> next = prefix_cache_->insert(
        r.chain, tokens.subspan(size_t{r.recorded_blocks} * block_size, block_size),
        r.blocks[r.recorded_blocks]);
    if (!next) {
      r.chain_lost = true;
      return;
    }
    r.chain = *next;
  }
}

void Engine::read_prompt_figures(Request& r, const hw_model_slice& slice, uint32_t first_row,
                                 size_t& top_used) {
  const hw_model_info& info = model_->info();
  const uint32_t count =
      std::min<uint32_t>(static_cast<uint32_t>(r.sampling.prompt_logprobs), info.vocab);
  // Row t gives the distribution of the token at position start + t + 1.
  const uint32_t from = std::max(slice.start + 1, r.prompt_logprobs_next);
  const uint32_t to = std::min(slice.start + slice.tokens + 1, r.own_prompt());
  for (uint32_t position = from; position < to; ++position) {
    const std::span<const float> logits(
        logits_.data() + (size_t{first_row} + position - 1 - slice.start) * info.vocab, info.vocab);
    const int32_t token = r.tokens[position];
    const std::span<TokenLogprob> top = std::span(prompt_top_).subspan(top_used, count);
    top_used += count;
    const float logprob = logprob_calculator_.compute(logits, token, top);
    prompt_figures_.push_back(
        PromptTokenLogprobs{position, token, logprob, rank_of(logits, token), top});
  }
  r.prompt_logprobs_next = std::max(r.prompt_logprobs_next, to);
}

void Engine::check_sampling(const std::string& who, const SamplingParams& sampling) const {
  if (!sampling.uses_host_processing()) return;
  // The service refuses these for such a model already; an engine never ignores them silently.
  const hw_model_info& info = model_->info();
  if (info.returns_logits == 0 && info.returns_logits_on_request == 0) {
    throw Error(
        fmt::format("{}: penalties, min_tokens, logit_bias, allowed_token_ids, bad_words, "
                    "logprobs and guided output need a model that returns logits; model '{}' "
                    "samples on its device only",
                    who, model_->name()));
  }
  if (sampling.prompt_logprobs >= 0 &&
      (model_->info().returns_prompt_logits == 0 || !model_needs_ids_)) {
    throw Error(
        fmt::format("{}: prompt_logprobs need a model that returns a logits row for every "
                    "prompt position and reads token ids; model '{}' does not",
                    who, model_->name()));
  }
  if (sampling.reads_outputs() && !model_needs_ids_) {
    throw Error(
        fmt::format("{}: penalties and bad words need the tokens of the request; model "
                    "'{}' reads none",
                    who, model_->name()));
  }
}

bool Engine::is_stop_token(const Request& r, int32_t token, uint32_t eos) const {
  if (r.sampling.guide && r.sampling.guide->ended()) return true;
  // min_tokens: the token's index among the outputs (it is counted already).
  if (r.outputs_before + r.output_tokens - 1 < r.sampling.min_tokens) return false;
  if (!r.sampling.ignore_eos && static_cast<uint32_t>(token) == eos) return true;
  for (int32_t stop : r.sampling.stop_token_ids) {
    if (stop == token) return true;
  }
  return false;
}

void Engine::take_prefilled(std::vector<uint64_t>& ready, std::vector<uint64_t>& finished) {
  ready.clear();
  ready.swap(prefilled_);
  finished.clear();
  finished.swap(prefill_only_finished_);
}

bool Engine::can_continue(uint32_t prompt_tokens, uint32_t output_tokens) const {
  return prompt_tokens + output_tokens < max_model_len_;
}

bool Engine::fits(uint32_t prompt_tokens, uint32_t max_output_tokens) const {
  return uint64_t{prompt_tokens} + max_output_tokens <= max_model_len_;
}

OutgoingTransfer Engine::outgoing(uint64_t id) const {
  const Request& r = requests_[slot_of(id)];
  if (r.state != HW_REQUEST_TRANSFERRING) {
    throw Error(fmt::format("{}: request {} is not waiting for a KV transfer", config_.name, id),
                HW_INTERNAL);
  }
  OutgoingTransfer out;
  out.request = IncomingTransfer{r.id,
                                 r.class_index,
                                 r.prompt_tokens,
                                 r.output_tokens,
                                 r.computed_tokens,
                                 r.max_output_tokens,
                                 r.priority,
                                 r.arrival,
                                 r.sampling,
                                 r.tokens,
                                 r.record,
                                 r.ends_after_outputs};
  out.blocks = &r.blocks;
  return out;
}

void Engine::release_transferred(uint64_t id) {
  const uint32_t slot = slot_of(id);
  if (requests_[slot].state != HW_REQUEST_TRANSFERRING) {
    throw Error(fmt::format("{}: request {} is not waiting for a KV transfer", config_.name, id),
                HW_INTERNAL);
  }
  release_slot(slot);
}

bool Engine::reserve_incoming(IncomingTransfer in, bool reuse_cached) {
  const std::string who = fmt::format("{}: incoming request {}", config_.name, in.id);
  if (id_to_slot_.count(in.id) != 0) throw Error(who + ": duplicate request id");
  // Its prompt was computed, and its figures reported, where it was prefilled.
  in.sampling.prompt_logprobs = -1;
  check_sampling(who, in.sampling);
  if (!can_continue(in.prompt_tokens, in.output_tokens)) {
    throw Error(fmt::format("{}: {} tokens leave no room within max_model_len {}", who,
                            in.prompt_tokens + in.output_tokens, max_model_len_));
  }
  // Its last token is computed here: with KV for every position it would wait with nothing to
  // compute, and a step of zero tokens would fail the engine.
  if (in.computed_tokens >= uint64_t{in.prompt_tokens} + in.output_tokens) {
    throw Error(
        fmt::format("{}: KV for {} positions arrives for {} tokens; it must leave the last "
                    "token to compute",
                    who, in.computed_tokens, uint64_t{in.prompt_tokens} + in.output_tokens));
  }
  const bool all = config_.moved_kv_blocks == EngineConfig::MovedKvBlocks::kAll;
  // With "all": blocks for everything the request will ever hold here, not just the KV that
  // arrives: a moved request never needs blocks later, so KV pressure never preempts it and
  // recomputes its prompt on this decode engine (and transfers cannot fill the cache with
  // requests that cannot all finish). The engine-wide check at start-up guarantees max_model_len
  // fits.
  // With "as_needed": the KV that arrives and the token sampled after it: its first step here
  // needs no block, so requests waiting with moved KV can always go on, even with no block free.
  // Growth comes later, as for a request prefilled here. A request preempted here is recomputed
  // before any new arrival, which could otherwise take each block its preemption freed, or those
  // its recompute's next chunks need; and a free block stays for each request that holds KV here
  // (its next one), so that a transfer does not preempt one at its next block boundary.
  const uint32_t need =
      all ? blocks_for(
                std::min<uint64_t>(static_cast<uint64_t>(in.prompt_tokens) + in.max_output_tokens,
                                   max_model_len_),
                config_.block_size)
          : blocks_for(static_cast<uint64_t>(in.prompt_tokens) + in.output_tokens,
                       config_.block_size);
  if (!all && catching_up_ != 0) return false;
  const uint32_t kept_free = all ? 0 : requests_holding_kv();
  // Blocks of the KV that arrives which this engine holds cached already are taken from its cache
  // instead (match_arriving_prefix); of those, the ones another request holds cost no free block.
  // Matched only where that can decide (room for all of it, or sharing to gain): a transfer that
  // waits for room looks its blocks up again on each try.
  arriving_prefix_.clear();
  uint32_t shared = 0;
  if (reuse_cached && (need + kept_free <= kv_.free() || share_cached_blocks_)) {
    shared = match_arriving_prefix(in);
  }
  if (static_cast<uint64_t>(need - shared) + kept_free > kv_.free()) return false;
  if (config_.prefix_caching && prefix_cache_ == nullptr && !in.tokens.empty()) {
    start_prefix_cache();
  }
  const uint32_t slot = occupy_slot(std::move(in), HW_REQUEST_TRANSFERRING);
  Request& r = requests_[slot];
  // The cached blocks first, before allocate() may evict idle ones.
  for (const PrefixCache::Link& link : arriving_prefix_) {
    kv_.take_cached(link.block, r.blocks);
    prefix_cache_->report_taken(link.block);
  }
  const auto cached = static_cast<uint32_t>(arriving_prefix_.size());
  if (cached > 0) {
    r.recorded_blocks = cached;  // recorded already: the cache holds them
    r.chain = arriving_prefix_.back();
  }
  r.arrived_cached_blocks = cached;
  // The room check above counted the taken blocks' share of free(): this cannot fail, and a
  // request holding fewer blocks than its KV would have its copy write past them.
  if (!kv_.allocate(need - cached, r.blocks)) {
    const uint64_t id = r.id;
    release_slot(slot);  // its blocks go back: nothing of it stays
    throw Error(fmt::format("{}: KV allocation for the KV arriving for request {} failed after "
                            "its room was checked",
                            config_.name, id),
                HW_INTERNAL);
  }
  return true;
}

uint32_t Engine::match_arriving_prefix(const IncomingTransfer& in) {
  arriving_prefix_.clear();
  if (prefix_cache_ == nullptr || in.tokens.empty()) return 0;
  const uint32_t block_size = config_.block_size;
  // Whole blocks of the KV that arrives (the positions computed where it was prefilled).
  const auto most =
      static_cast<uint32_t>(std::min<size_t>(in.computed_tokens, in.tokens.size()) / block_size);
  uint32_t shared = 0;
  extend_cached_run(in.tokens, most, arriving_prefix_, [&](uint32_t block) {
    // Without sharing, a block another request holds is not taken (as for a prompt prefilled
    // here: the scheduler would count it as freed by preempting either).
    const bool idle = kv_.is_idle_cached(block);
    if (!idle && !share_cached_blocks_) return false;
    shared += idle ? 0 : 1;
    return true;
  });
  return shared;
}

template <class Take>
void Engine::extend_cached_run(std::span<const int32_t> tokens, uint32_t most,
                               std::vector<PrefixCache::Link>& run, Take take) {
  const uint32_t block_size = config_.block_size;
  PrefixCache::Link after = run.empty() ? PrefixCache::kStart : run.back();
  for (auto b = static_cast<uint32_t>(run.size()); b < most; ++b) {
    const uint32_t block =
        prefix_cache_->find(after, tokens.subspan(size_t{b} * block_size, block_size));
    if (block == PrefixCache::kNoBlock || !take(block)) break;
    after = prefix_cache_->link_of(block);
    run.push_back(after);
  }
}

uint32_t Engine::incoming_cached_blocks(uint64_t id) const {
  return requests_[slot_of(id)].arrived_cached_blocks;
}

uint32_t Engine::requests_holding_kv() const {
  // Running, moving their KV in, or waiting with it: a scan of the slots, made only while a moved
  // request waits for room, at most a few times a step.
  uint32_t holding = 0;
  for (const Request& r : requests_) holding += r.in_use && !r.blocks.empty();
  return holding;
}

const std::vector<uint32_t>& Engine::incoming_blocks(uint64_t id) const {
  return requests_[slot_of(id)].blocks;
}

void Engine::complete_transfer(uint64_t id) {
  Request& r = requests_[slot_of(id)];
  if (r.state != HW_REQUEST_TRANSFERRING) {
    throw Error(fmt::format("{}: request {} has no transfer in flight", config_.name, id),
                HW_INTERNAL);
  }
  r.state = HW_REQUEST_WAITING;
  // Counted as it arrives: a reservation whose copy fails is released and prefilled instead.
  counters_.moved_kv_cached_tokens += uint64_t{r.arrived_cached_blocks} * config_.block_size;
  // At the head of the queue: it is ready to decode and already holds every block it needs.
  push_waiting_front(r);
}

hw_engine_load Engine::load() const {
  uint64_t prefill = waiting_prompt_tokens_;
  uint64_t decode = waiting_output_tokens_;
  for (uint32_t slot : running_) {
    const Request& r = requests_[slot];
    uint32_t left = r.total() - r.computed_tokens;
    bool decoding = r.output_tokens > 0 && left == 1;
    if (!decoding) prefill += left;
    decode += r.max_output_tokens - r.output_tokens;
  }
  return hw_engine_load{config_.index,
                        config_.role,
                        hw_str{config_.pool.data(), config_.pool.size()},
                        1,
                        static_cast<uint32_t>(running_.size()),
                        static_cast<uint32_t>(waiting_size()),
                        prefill,
                        prefill + decode,
                        kv_.free(),
                        kv_.total(),
                        config_.block_size};
}

}  // namespace headway::core
