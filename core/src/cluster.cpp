#include <fmt/format.h>
#include <headway/core/cluster.h>
#include <headway/core/error.h>
#include <headway/core/model_architecture.h>
#include <headway/core/route_prefix.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

namespace headway::core {

namespace {

// Wall seconds a simulated KV transfer may take to answer with its modelled duration: microseconds
// for a transport that computes it on its own thread, so far more than enough.
constexpr double kSimulatedAnswerS = 2.0;

// Engines with model_options may run the model differently (tensor parallelism, memory), never
// another model: requests move between engines, and a KV cache moved to an engine of another shape
// (or element size: kv_bytes_per_token, which the sim model reports for the whole model) would be
// garbage. Every engine's model is held to the first's; the message names the tables that gave
// each ("[model]" for an engine without model_options).
void check_same_model(const DeploymentConfig& config, const EngineConfig& engine,
                      const Engine& first, const Engine& made) {
  const hw_model_info& a = first.model_info();
  const hw_model_info& b = made.model_info();
  std::optional<ArchitectureDifference> d = architecture_difference(a, b);
  if (!d && a.kv_bytes_per_token != b.kv_bytes_per_token) {
    d = ArchitectureDifference{"KV bytes per token", a.kv_bytes_per_token, b.kv_bytes_per_token};
  }
  if (!d) return;
  const auto table = [&](const EngineConfig& e) {
    return e.model ? e.model->where : config.model.where;
  };
  throw Error(fmt::format(
      "{} ({}) and {} ({}) give models of different {} ({} and {}): model_options may change how "
      "the model runs (tensor parallelism, memory), not which model it is",
      table(config.engines.front()), config.engines.front().name, table(engine), engine.name,
      d->field, d->a, d->b));
}

// A prefill or decode engine on the wall clock whose model describes no KV memory (the cuda model
// under tensor parallelism: a block lives on several GPUs) has nothing a transport could copy: a
// transfer would "complete" leaving the decode engine's blocks as they were, read as the request's
// KV. Refused here, where the deployment is read, rather than per request.
void check_kv_can_move(const DeploymentConfig& config,
                       const std::vector<std::unique_ptr<Engine>>& engines) {
  for (size_t i = 0; i < engines.size(); ++i) {
    const Engine& e = *engines[i];
    const int32_t role = config.engines[i].role;
    if (role == HW_ENGINE_ROLE_MIXED || e.model_info().reports_duration != 0 ||
        e.kv_memory().kind != HW_MEMORY_NONE) {
      continue;
    }
    throw Error(fmt::format(
        "{}: engines ({}): model '{}' describes no KV memory a transport could copy (the cuda "
        "model under tensor_parallel > 1 has none: a block lives on several GPUs), so its KV "
        "cannot move to or from a {} engine through [kv_transport] '{}'; run prefill and "
        "decode engines with tensor_parallel = 1, or serve the model on mixed engines",
        config.file.string(), config.engines[i].name, e.model_name(),
        role == HW_ENGINE_ROLE_PREFILL ? "decode" : "prefill",
        config.kv_transport->plugin->short_name()));
  }
}

}  // namespace

Cluster::Cluster(const DeploymentConfig& config,
                 std::chrono::steady_clock::time_point wall_origin) {
  for (const EngineConfig& engine : config.engines) {
    engines_.push_back(std::make_unique<Engine>(engine, config, wall_origin));
    check_same_model(config, engine, *engines_.front(), *engines_.back());
  }
  alive_.assign(engines_.size(), true);
  if (engines_.front()->clock().is_virtual()) {
    clock_ = std::make_unique<VirtualClock>();
  } else {
    clock_ = std::make_unique<WallClock>(wall_origin);
  }
  router_host_ =
      std::make_unique<HostServices>("router " + config.router.plugin->short_name(), clock_.get());
  loads_.resize(engines_.size());
  std::vector<hw_engine_limits> limits(engines_.size());
  for (size_t i = 0; i < engines_.size(); ++i) {
    loads_[i] = engines_[i]->load();
    limits[i] = hw_engine_limits{sizeof(hw_engine_limits), static_cast<uint32_t>(i),
                                 engines_[i]->config().max_waiting, engines_[i]->max_model_len()};
  }
  router_ = std::make_unique<RouterInstance>(config.router, loads_, *router_host_, limits);
  hashes_prefixes_ = router_->reads_prefixes() && std::any_of(engines_.begin(), engines_.end(),
                                                              [](const std::unique_ptr<Engine>& e) {
                                                                return e->prefix_caching();
                                                              });
  // Before the first request: a cache's chains are followed from their first block.
  if (router_->reads_kv_events()) {
    for (size_t i = 0; i < engines_.size(); ++i) {
      engines_[i]->keep_kv_events();
      if (engines_[i]->keeps_kv_events()) router_->kv_events(static_cast<uint32_t>(i), {});
    }
  }
  if (config.kv_transport) {
    check_kv_can_move(config, engines_);
    transport_host_ = std::make_unique<HostServices>(
        "kv_transport " + config.kv_transport->plugin->short_name(), clock_.get());
    transport_ = std::make_unique<KvTransportInstance>(*config.kv_transport, *transport_host_);
  }
  pending_.resize(engines_.size());
  expected_.resize(engines_.size());
  outgoing_link_.resize(engines_.size());
  incoming_link_.resize(engines_.size());
}

Cluster::~Cluster() {
  // Plugin instances go before the host services they were created with.
  router_.reset();
  transport_.reset();
}

uint32_t Cluster::admitted_max_model_len() const {
  uint32_t smallest = UINT32_MAX, largest = 0;
  for (const auto& engine : engines_) {
    smallest = std::min(smallest, engine->max_model_len());
    if (engine->config().role != HW_ENGINE_ROLE_PREFILL) {
      largest = std::max(largest, engine->max_model_len());
    }
  }
  // A router before ABI 1.7 knows no lengths, so any engine it picks must hold what is admitted.
  return router_->reads_model_lengths() && largest > 0 ? largest : smallest;
}

hw_route_decision Cluster::route(const hw_route_request& request,
                                 std::span<const uint64_t> prefix_hashes) {
  for (size_t i = 0; i < engines_.size(); ++i) {
    loads_[i] = engines_[i]->load();
    loads_[i].alive = alive_[i] ? 1 : 0;
    // As a waiting request each, as they will be once their KV has moved.
    loads_[i].waiting += expected_[i].requests;
    loads_[i].outstanding_tokens += expected_[i].tokens;
    // Every step so far happened before this request arrives (the simulator runs events in time
    // order): the router sees the caches as they are now.
    if (engines_[i]->keeps_kv_events()) {
      kv_events_.clear();
      engines_[i]->take_kv_events(kv_events_);
      if (!kv_events_.empty()) router_->kv_events(static_cast<uint32_t>(i), kv_events_);
    }
  }
  return router_->route(request, loads_, prefix_hashes);
}

hw_route_decision Cluster::route(const hw_route_request& request,
                                 std::span<const hw_engine_load> loads,
                                 std::span<const uint64_t> prefix_hashes) {
  if (loads.size() != engines_.size()) {
    throw Error(
        fmt::format("route: {} engine loads given for {} engines", loads.size(), engines_.size()),
        HW_INTERNAL);
  }
  return router_->route(request, loads, prefix_hashes);
}

uint32_t Cluster::submit(NewRequest request, const hw_route_request& route_request) {
  // One that no engine could hold is refused naming the limit, as `serve` refuses it, rather
  // than with the router's "no engine holds" (which names the request's length only). A request
  // that ends at its first token never leaves the engine that prefills it (below): any engine
  // may hold it; the others must be held by one that decodes. As many comparisons as engines,
  // beside a route() that reads every engine's load.
  const bool moves = request.max_output_tokens > 1 && request.ends_after_outputs != 1;
  uint32_t largest = 0;
  for (const auto& engine : engines_) {
    if (moves && engine->config().role == HW_ENGINE_ROLE_PREFILL) continue;
    largest = std::max(largest, engine->max_model_len());
  }
  if (largest > 0 && uint64_t{request.prompt_tokens} + request.max_output_tokens > largest) {
    throw Error(
        fmt::format("request {}: {} prompt tokens and {} output tokens exceed "
                    "max_model_len {}, the largest of the deployment's engines{}",
                    request.id, request.prompt_tokens, request.max_output_tokens, largest,
                    moves ? " that decode" : ""));
  }
  if (hashes_prefixes_) route_prefix_hashes(request.prompt, prefix_hashes_);
  const hw_route_decision decision = route(route_request, prefix_hashes_);
  const bool disaggregated = decision.prefill_engine != decision.decode_engine;
  if (disaggregated && transport_ == nullptr) {
    throw Error(
        fmt::format("router '{}' placed request {} on engine{} for prefill and engine{} "
                    "for decode, but the deployment has no [kv_transport] to move its KV",
                    router_->name(), request.id, decision.prefill_engine, decision.decode_engine));
  }
  // Refused before any prefill work is spent on it, as the prefill engine refuses what its own
  // max_model_len cannot hold. A request that ends at its first token never moves (its prefill
  // engine samples that token and finishes it), so its decode engine need not hold it: a prompt
  // of max_model_len - 1 with one output token is served, as one engine serves it.
  if (disaggregated && moves &&
      !engines_[decision.decode_engine]->fits(request.prompt_tokens, request.max_output_tokens)) {
    throw Error(
        fmt::format("request {}: {} prompt tokens and {} output tokens exceed "
                    "max_model_len {} of engine{}, its decode engine",
                    request.id, request.prompt_tokens, request.max_output_tokens,
                    engines_[decision.decode_engine]->max_model_len(), decision.decode_engine));
  }
  request.prefill_only = disaggregated;
  const uint64_t id = request.id;
  const uint32_t request_tokens = request.max_output_tokens;  // the decode work it brings there
  engines_[decision.prefill_engine]->add_request(std::move(request));
  if (disaggregated) {
    decode_engine_of_[id] = HeadedTo{decision.decode_engine, request_tokens};
    expected_[decision.decode_engine].requests += 1;
    expected_[decision.decode_engine].tokens += request_tokens;
  }
  return decision.prefill_engine;
}

void Cluster::no_longer_headed(uint64_t id) {
  auto it = decode_engine_of_.find(id);
  if (it == decode_engine_of_.end()) return;
  Expected& expected = expected_[it->second.engine];
  expected.requests -= 1;
  expected.tokens -= it->second.tokens;
  decode_engine_of_.erase(it);
}

void Cluster::collect_prefilled(size_t e, double now) {
  engines_[e]->take_prefilled(prefilled_scratch_, finished_scratch_);
  for (uint64_t id : finished_scratch_) no_longer_headed(id);
  if (prefilled_scratch_.empty()) return;
  for (uint64_t id : prefilled_scratch_) {
    auto it = decode_engine_of_.find(id);
    if (it == decode_engine_of_.end()) {
      throw Error(fmt::format("engine{} prefilled request {} for a transfer nobody planned", e, id),
                  HW_INTERNAL);
    }
    pending_[it->second.engine].push_back(PendingTransfer{id, static_cast<uint32_t>(e), now});
  }
  // Each destination starts what fits, in arrival order of the prefills.
  for (uint64_t id : prefilled_scratch_) start_transfers(decode_engine_of_.at(id).engine, now);
}

Error Cluster::transfer_failure(uint64_t id, uint32_t source, size_t destination) const {
  // A simulated deployment's transport models links that do not fail, so a failure is the
  // plugin's: the run stops and says so. (A served deployment prefills the request again on its
  // decode engine instead, docs/serving.md.)
  return Error(fmt::format("KV transport '{}': poll() answered FAILED for the transfer of request "
                           "{} from engine{} to engine{}; a simulation stops at a failed transfer",
                           transport_->name(), id, source, destination),
               HW_UNAVAILABLE);
}

void Cluster::start_transfers(size_t d, double now) {
  std::deque<PendingTransfer>& queue = pending_[d];
  Engine& destination = *engines_[d];
  while (!queue.empty()) {
    const PendingTransfer& p = queue.front();
    Engine& source = *engines_[p.source];
    OutgoingTransfer out = source.outgoing(p.id);
    RequestRecord* record = out.request.record;
    const uint32_t computed = out.request.computed_tokens;
    if (!destination.reserve_incoming(std::move(out.request))) break;  // backpressure
    const std::vector<uint32_t>& dst_blocks = destination.incoming_blocks(p.id);
    // The KV computed so far; the destination reserved more, for the outputs still to come.
    const uint32_t block_size = destination.config().block_size;
    const uint32_t count = (computed + block_size - 1) / block_size;
    if (out.blocks->size() < count || dst_blocks.size() < count) {
      throw Error(fmt::format("request {}: engine{} holds {} KV blocks, engine{} expects {}", p.id,
                              p.source, out.blocks->size(), d, count),
                  HW_INTERNAL);
    }
    // The leading blocks the destination's prefix cache held already are not copied.
    const uint32_t cached = destination.incoming_cached_blocks(p.id);
    if (cached >= count) {
      arrive_without_copy(p, d, record);
      queue.pop_front();
      continue;
    }
    hw_kv_transfer transfer{sizeof(hw_kv_transfer),
                            p.id,
                            source.kv_memory(),
                            destination.kv_memory(),
                            out.blocks->data() + cached,
                            dst_blocks.data() + cached,
                            count - cached,
                            p.source,
                            static_cast<uint32_t>(d)};
    // The destination's blocks and queues are as of its own clock, which may be past `now` (a
    // prefill engine's step that ended inside a step of the destination): the room it found is
    // there from its clock on, so a transfer into it starts no earlier (helper-182: a transfer
    // started at the prefill's end copied into blocks a request held until the decode step's end).
    InFlightTransfer flight{p.id,
                            p.source,
                            static_cast<uint32_t>(d),
                            transport_->start(transfer),
                            std::max({now, p.ready, destination.clock().now()}),
                            0.0,
                            false,
                            record};
    // Real transfers finish later. A simulated one (no bytes behind the regions) answers with its
    // modelled duration, which the virtual clock needs now to place its completion: a transport
    // may compute it on a thread of its own, so its answer is awaited, within kSimulatedAnswerS of
    // wall time (helper-120's walk: an asynchronous transport's transfers were never polled
    // again and the run ended with them PENDING).
    KvTransportInstance::Progress progress = transport_->poll(flight.handle);
    if (transfer.source.kind == HW_MEMORY_NONE && progress.state == HW_TRANSFER_PENDING) {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::duration<double>(kSimulatedAnswerS);
      while (progress.state == HW_TRANSFER_PENDING && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        progress = transport_->poll(flight.handle);
      }
      if (progress.state == HW_TRANSFER_PENDING) {
        throw Error(fmt::format("KV transport '{}': a simulated transfer (request {}) still "
                                "answered PENDING {:.0f} s after it started; a simulated transfer "
                                "answers DONE with its modelled duration (abi.h, poll())",
                                transport_->name(), p.id, kSimulatedAnswerS),
                    HW_INTERNAL);
      }
    }
    if (progress.state == HW_TRANSFER_FAILED) throw transfer_failure(p.id, p.source, d);
    if (progress.state == HW_TRANSFER_DONE) {
      // A simulated transfer's duration is its bytes at the link's whole bandwidth: it waits for
      // the transfers already on its links (helper-210: ten transfers of 1 GB from one prefill
      // engine over TCP did 4.2 s of copying in 2.8 s). A real one's was measured as it ran.
      if (transfer.source.kind == HW_MEMORY_NONE) place_on_links(flight, progress.seconds);
      flight.finished = true;
      flight.done = flight.start + progress.seconds;
    }
    if (record != nullptr) record->kv_wait_seconds = flight.start - p.ready;
    in_flight_.push_back(flight);
    ++transfers_started_;
    queue.pop_front();
  }
}

void Cluster::place_on_links(InFlightTransfer& flight, double seconds) {
  LinkSchedule& out = outgoing_link_[flight.source];
  LinkSchedule& in = incoming_link_[flight.destination];
  // No transfer placed from now on starts before the earliest engine clock (a transfer starts no
  // earlier than its destination's clock, and clocks only advance), so what ended before it is
  // of no further use.
  double earliest = engines_.front()->clock().now();
  for (const auto& engine : engines_) earliest = std::min(earliest, engine->clock().now());
  out.forget_before(earliest);
  in.forget_before(earliest);
  flight.start = LinkSchedule::first_common_gap(out, in, flight.start, seconds);
  out.book(flight.start, flight.start + seconds);
  in.book(flight.start, flight.start + seconds);
}

void Cluster::arrive_without_copy(const PendingTransfer& p, size_t d, RequestRecord* record) {
  // Every block it brings is cached at the destination: it arrives once the destination has room
  // (its clock) and the prefill is done, with no transfer (kv_transfer_seconds 0).
  const double at = std::max(p.ready, engines_[d]->clock().now());
  if (record != nullptr) record->kv_wait_seconds = at - p.ready;
  in_flight_.push_back(
      InFlightTransfer{p.id, p.source, static_cast<uint32_t>(d), 0, at, at, true, record});
  ++transfers_started_;  // a transfer of no blocks: the request's KV moved all the same
}

std::optional<double> Cluster::next_transfer_completion() const {
  std::optional<double> next;
  for (const InFlightTransfer& f : in_flight_) {
    if (f.finished && (!next || f.done < *next)) next = f.done;
  }
  return next;
}

size_t Cluster::complete_transfers(double t) {
  size_t completed = 0;
  for (size_t i = 0; i < in_flight_.size();) {
    InFlightTransfer& f = in_flight_[i];
    if (!f.finished) {
      KvTransportInstance::Progress progress = transport_->poll(f.handle);
      if (progress.state == HW_TRANSFER_FAILED) {
        throw transfer_failure(f.id, f.source, f.destination);
      }
      if (progress.state == HW_TRANSFER_DONE) {
        f.finished = true;
        f.done = f.start + progress.seconds;
      }
    }
    if (!f.finished || f.done > t) {
      ++i;
      continue;
    }
    Engine& destination = *engines_[f.destination];
    if (!destination.has_work()) destination.clock().advance_to(f.done);
    destination.complete_transfer(f.id);
    engines_[f.source]->release_transferred(f.id);
    if (f.record != nullptr) {
      f.record->kv_transfer_seconds = f.done - f.start;
      f.record->kv_moved = true;
    }
    no_longer_headed(f.id);
    in_flight_[i] = in_flight_.back();
    in_flight_.pop_back();
    ++completed;
  }
  return completed;
}

size_t Cluster::transfers_waiting() const {
  size_t n = 0;
  for (const auto& q : pending_) n += q.size();
  return n;
}

}  // namespace headway::core
