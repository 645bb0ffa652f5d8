#include <fmt/format.h>
#include <headway/core/engine_role.h>
#include <headway/core/error.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/route_prefix.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>

namespace headway::core {
namespace {

// The plugin call running on this thread (current_plugin_call()); pointers into the caller's
// arguments, valid for the call.
struct PluginCall {
  const char* kind = nullptr;
  const std::string* name = nullptr;
  const char* function = nullptr;
};
thread_local PluginCall running_call;

// Marks the call for its duration; calls do not nest, but a restored value costs nothing.
class PluginCallMark {
 public:
  PluginCallMark(const char* kind, const std::string& name, const char* function)
      : before_(running_call) {
    running_call = PluginCall{kind, &name, function};
  }
  ~PluginCallMark() { running_call = before_; }
  PluginCallMark(const PluginCallMark&) = delete;
  PluginCallMark& operator=(const PluginCallMark&) = delete;

 private:
  PluginCall before_;
};

// Runs one call into a plugin's C table. The SDK's adapters never let an exception out, but a
// hand-written table can, and one that crosses the C ABI would surface far from its cause (or end
// the process): it becomes an Error naming the plugin and the function. It is undefined behaviour
// in C++ terms (docs/sdk.md), a broken contract like an undefined status code, so it is a
// PluginContractError: the host handles it as any Error (HW_INTERNAL), and the conformance suite
// fails it where it would take a status for a failure the plugin reported (a transport's start()
// refusing a bad block, a router's create() refusing a shape). Costs two thread-local stores (the
// call's mark) unless something is thrown, so the per-step calls go through it too.
template <class Call>
int32_t call_plugin(const char* kind, const std::string& name, const char* function, Call&& call) {
  const PluginCallMark mark(kind, name, function);
  try {
    return call();
  } catch (const std::exception& e) {
    throw PluginContractError(
        fmt::format("{} '{}' {}: a C++ exception escaped the plugin's C ABI ({}); a plugin must "
                    "return a status instead (the SDK's adapters do)",
                    kind, name, function, e.what()),
        HW_INTERNAL);
  } catch (...) {
    throw PluginContractError(
        fmt::format("{} '{}' {}: an exception escaped the plugin's C ABI; a plugin must return a "
                    "status instead (the SDK's adapters do)",
                    kind, name, function),
        HW_INTERNAL);
  }
}

// destroy() and peer_close() run in destructors and on failure paths, where nothing may be thrown:
// an escaping exception is logged.
template <class Call>
void call_plugin_quietly(const char* kind, const std::string& name, const char* function,
                         Call&& call) {
  const PluginCallMark mark(kind, name, function);
  try {
    call();
  } catch (const std::exception& e) {
    spdlog::error("{} '{}' {}: a C++ exception escaped the plugin's C ABI ({})", kind, name,
                  function, e.what());
  } catch (...) {
    spdlog::error("{} '{}' {}: an exception escaped the plugin's C ABI", kind, name, function);
  }
}

constexpr const char* kScheduler = "scheduler";
constexpr const char* kModel = "model";
constexpr const char* kRouter = "router";
constexpr const char* kTransport = "KV transport";

// What makes a model's get_info() unusable by an engine, or empty: a struct_size that does not
// cover ABI 1.0's fields (the host reads the struct by the size the plugin declares: a
// hand-written table that left it 0 filled nothing), vocab 0, kv_bytes_per_token 0.
std::string model_info_problem(const hw_model_info& info) {
  constexpr size_t kInfo10 = offsetof(hw_model_info, returns_logits) + sizeof(int32_t);
  if (info.struct_size < kInfo10) {
    return "struct_size " + std::to_string(info.struct_size) + " is smaller than ABI 1.0's " +
           std::to_string(kInfo10) + "-byte hw_model_info (set it to sizeof(hw_model_info))";
  }
  std::string problem;
  const auto add = [&](const std::string& what) {
    problem += (problem.empty() ? "" : "; ") + what;
  };
  // Sampled ids and logits rows are indexed by it; 0 leaves the host a logits buffer of nothing.
  if (info.vocab == 0) add("vocab 0 (the vocabulary size must be at least 1)");
  // Transfers and the simulated KV size blocks by it.
  if (info.kv_bytes_per_token == 0) {
    add("kv_bytes_per_token 0 (a token's KV takes bytes: the model's, all layers, K and V)");
  }
  return problem;
}

// create() returned HW_OK: every later call gets the handle it set. NULL is a plugin that forgot to
// set *out, whose next call would crash far from the cause (a plugin without state returns the
// address of a static object).
void require_handle(const void* handle, const std::string& what) {
  if (handle != nullptr) return;
  throw PluginContractError(what +
                                ": returned HW_OK but left the handle (*out) NULL; create() "
                                "must set it to the instance every later call receives",
                            HW_INTERNAL);
}

}  // namespace

bool current_plugin_call_parts(const char*& kind, std::string_view& name,
                               const char*& function) noexcept {
  const PluginCall call = running_call;
  if (call.kind == nullptr) return false;
  kind = call.kind;
  name = *call.name;
  function = call.function;
  return true;
}

std::string current_plugin_call() {
  const PluginCall call = running_call;
  if (call.kind == nullptr) return {};
  return fmt::format("{} '{}' {}()", call.kind, *call.name, call.function);
}

SchedulerInstance::SchedulerInstance(const PluginChoice& choice, const hw_engine_facts& facts,
                                     const HostServices& host)
    : table_(&choice.plugin->table<hw_scheduler_table>()), name_(choice.plugin->short_name()) {
  hw_status status{};
  check_status(call_plugin(kScheduler, name_, "create",
                           [&] {
                             return table_->create(host.table(), choice.options->view(), &facts,
                                                   &handle_, &status);
                           }),
               status, choice.where + ": scheduler '" + name_ + "' create");
  require_handle(handle_, choice.where + ": scheduler '" + name_ + "' create");
  int32_t code = HW_INTERNAL;
  status = hw_status{};  // zeroed before every call (abi.h), whatever create() left in it
  try {
    code = call_plugin(kScheduler, name_, "get_limits",
                       [&] { return table_->get_limits(handle_, &limits_, &status); });
  } catch (...) {
    call_plugin_quietly(kScheduler, name_, "destroy", [&] { table_->destroy(handle_); });
    throw;
  }
  // The host reads the limits by the size the plugin declares (abi.h): one that left struct_size
  // 0 filled nothing the host may read, whatever its fields hold.
  constexpr size_t kLimits10 = offsetof(hw_scheduler_limits, max_num_seqs) + sizeof(uint32_t);
  if (code != HW_OK || limits_.struct_size < kLimits10 || limits_.max_num_batched_tokens == 0 ||
      limits_.max_num_seqs == 0) {
    call_plugin_quietly(kScheduler, name_, "destroy", [&] { table_->destroy(handle_); });
    if (code != HW_OK) check_status(code, status, choice.where + ": scheduler get_limits");
    if (limits_.struct_size < kLimits10) {
      handle_ = nullptr;
      throw PluginContractError(
          fmt::format("{}: scheduler '{}' get_limits: struct_size {} is smaller than ABI 1.0's "
                      "{}-byte hw_scheduler_limits (set it to sizeof(hw_scheduler_limits))",
                      choice.where, name_, limits_.struct_size, kLimits10),
          HW_INTERNAL);
    }
    // The plugin's fault, not the operator's options (a schema that lets an option reach 0
    // is the plugin's too): HW_INTERNAL, so that the conformance suite fails it.
    throw PluginContractError(
        fmt::format("{}: scheduler '{}' get_limits: declares max_num_batched_tokens {} and "
                    "max_num_seqs {}; both must be at least 1 (abi.h)",
                    choice.where, name_, limits_.max_num_batched_tokens, limits_.max_num_seqs),
        HW_INTERNAL);
  }
}

SchedulerInstance::~SchedulerInstance() {
  if (handle_ != nullptr)
    call_plugin_quietly(kScheduler, name_, "destroy", [&] { table_->destroy(handle_); });
}

void SchedulerInstance::schedule(const hw_scheduler_snapshot& snapshot, hw_scheduler_plan& plan) {
  hw_status status{};
  const int32_t code = call_plugin(kScheduler, name_, "schedule", [&] {
    return table_->schedule(handle_, &snapshot, &plan, &status);
  });
  if (code != HW_OK) check_status(code, status, "scheduler '" + name_ + "' schedule");
}

ModelInstance::ModelInstance(const PluginChoice& choice, const std::string& config_dir,
                             const HostServices& host)
    : table_(&choice.plugin->table<hw_model_table>()), name_(choice.plugin->short_name()) {
  hw_status status{};
  check_status(call_plugin(kModel, name_, "create",
                           [&] {
                             return table_->create(host.table(), choice.options->view(),
                                                   hw_str{config_dir.data(), config_dir.size()},
                                                   &handle_, &status);
                           }),
               status, choice.where + ": model '" + name_ + "' create");
  require_handle(handle_, choice.where + ": model '" + name_ + "' create");
  int32_t code = HW_INTERNAL;
  status = hw_status{};  // zeroed before every call (abi.h), whatever create() left in it
  try {
    code = call_plugin(kModel, name_, "get_info",
                       [&] { return table_->get_info(handle_, &info_, &status); });
  } catch (...) {
    call_plugin_quietly(kModel, name_, "destroy", [&] { table_->destroy(handle_); });
    throw;
  }
  if (code != HW_OK) {
    call_plugin_quietly(kModel, name_, "destroy", [&] { table_->destroy(handle_); });
    check_status(code, status, choice.where + ": model '" + name_ + "' get_info");
  }
  const std::string problem = model_info_problem(info_);
  if (!problem.empty()) {
    call_plugin_quietly(kModel, name_, "destroy", [&] { table_->destroy(handle_); });
    handle_ = nullptr;
    // HW_INTERNAL: the plugin's fault, not the options' (conformance takes HW_INVALID_ARGUMENT
    // from create or get_info for options the plugin refused).
    throw PluginContractError(choice.where + ": model '" + name_ + "' get_info: " + problem,
                              HW_INTERNAL);
  }
  if (info_.struct_size < offsetof(hw_model_info, returns_logits_on_request) + sizeof(int32_t)) {
    info_.returns_logits_on_request = 0;
  }
  // returns_prompt_logits sits where a 1.3 struct had tail padding (the size is the same), which
  // a plugin built before 1.4 may have left unset: only a 1.4 plugin can mean it.
  if (choice.plugin->descriptor->abi_minor < 4) info_.returns_prompt_logits = 0;
  // returns_logits_on_request lies past a 1.4 plugin's struct; a plugin that returns logits for
  // every row has nothing to return on request.
  if (choice.plugin->descriptor->abi_minor < 5 || info_.returns_logits != 0) {
    info_.returns_logits_on_request = 0;
  }
}

ModelInstance::~ModelInstance() {
  if (handle_ != nullptr)
    call_plugin_quietly(kModel, name_, "destroy", [&] { table_->destroy(handle_); });
}

void ModelInstance::init_kv(uint32_t blocks, uint32_t block_size) {
  hw_status status{};
  check_status(call_plugin(kModel, name_, "init_kv",
                           [&] { return table_->init_kv(handle_, blocks, block_size, &status); }),
               status, "model '" + name_ + "' init_kv");
}

hw_memory_desc ModelInstance::kv_memory() {
  hw_memory_desc memory{nullptr, 0, HW_MEMORY_NONE, -1, 0, 0};
  if (table_->kv_memory == nullptr) return memory;
  hw_status status{};
  check_status(call_plugin(kModel, name_, "kv_memory",
                           [&] { return table_->kv_memory(handle_, &memory, &status); }),
               status, "model '" + name_ + "' kv_memory");
  return memory;
}

void ModelInstance::forward(const hw_model_batch& batch, hw_model_output& output) {
  hw_status status{};
  const uint32_t asked = output.logits_rows;  // the host sets it to the rows the batch asks for
  const int32_t code = call_plugin(
      kModel, name_, "forward", [&] { return table_->forward(handle_, &batch, &output, &status); });
  if (code != HW_OK) check_status(code, status, "model '" + name_ + "' forward");
  // Fewer rows than asked would leave the sampler reading the previous step's; more would name
  // rows past the buffer.
  if (output.logits_rows != asked) {
    throw PluginContractError("model '" + name_ + "' wrote " + std::to_string(output.logits_rows) +
                                  " logits rows where the batch asks for " + std::to_string(asked) +
                                  " (hw_model_output.logits_rows, headway::sdk::logits_rows)",
                              HW_INTERNAL);
  }
}

RouterInstance::RouterInstance(const PluginChoice& choice, std::span<const hw_engine_load> engines,
                               const HostServices& host, std::span<const hw_engine_limits> limits)
    : table_(&choice.plugin->table<hw_router_table>()),
      name_(choice.plugin->short_name()),
      where_(choice.where) {
  hw_status status{};
  check_status(
      call_plugin(kRouter, name_, "create",
                  [&] {
                    return table_->create(host.table(), choice.options->view(), engines.data(),
                                          static_cast<uint32_t>(engines.size()), &handle_, &status);
                  }),
      status,
      choice.where + ": router '" + name_ + "' (" + choice.plugin->path.string() + ") create");
  require_handle(handle_, choice.where + ": router '" + name_ + "' create");
  if (table_->struct_size >=
      offsetof(hw_router_table, set_engine_limits) + sizeof(table_->set_engine_limits)) {
    set_engine_limits_ = table_->set_engine_limits;
    // A 1.6 plugin's struct ends before max_model_len: it never reads the field.
    reads_model_lengths_ = choice.plugin->descriptor->abi_minor >= 7;
  }
  if (table_->struct_size >=
      offsetof(hw_router_table, route_with_prefix) + sizeof(table_->route_with_prefix)) {
    route_with_prefix_ = table_->route_with_prefix;
  }
  if (table_->struct_size >= offsetof(hw_router_table, kv_events) + sizeof(table_->kv_events)) {
    kv_events_ = table_->kv_events;
  }
  std::vector<hw_engine_limits> unbounded;
  if (limits.empty()) {
    for (size_t e = 0; e < engines.size(); ++e) {
      unbounded.push_back(
          hw_engine_limits{sizeof(hw_engine_limits), static_cast<uint32_t>(e), 0, 0});
    }
    limits = unbounded;
  }
  try {
    set_engine_limits(limits);
  } catch (...) {
    // No destructor runs for an object whose constructor throws.
    call_plugin_quietly(kRouter, name_, "destroy", [&] { table_->destroy(handle_); });
    throw;
  }
}

void RouterInstance::set_engine_limits(std::span<const hw_engine_limits> limits) {
  if (set_engine_limits_ == nullptr) return;
  limits_.assign(limits.begin(), limits.end());  // same size after the first: no allocation
  hw_status status{};
  const int32_t code = call_plugin(kRouter, name_, "set_engine_limits", [&] {
    return set_engine_limits_(handle_, limits.data(), static_cast<uint32_t>(limits.size()),
                              &status);
  });
  if (code != HW_OK) {
    throw Error(fmt::format("{}: router '{}' set_engine_limits() failed with status code {}: {}",
                            where_, name_, code, plugin_message(status)),
                HW_INTERNAL);
  }
}

void RouterInstance::kv_events(uint32_t engine, std::span<const hw_kv_event> events) {
  if (kv_events_ == nullptr) return;
  if (kv_events_owed_.size() <= engine) kv_events_owed_.resize(size_t{engine} + 1, 0);
  uint8_t& owed = kv_events_owed_[engine];
  // After a failed call the router may have missed what it said: a failed announcement is made
  // again before the engine's next events, and after failed events the next ones begin with
  // ALL_REMOVED, as after events a log dropped. Rare, so the copy's allocation does not matter.
  if ((owed & kAnnouncementOwed) != 0 && !events.empty()) {
    try {
      call_kv_events(engine, {});
    } catch (...) {
      owed |= kForgettingOwed;  // these events are lost with it
      throw;
    }
    owed &= static_cast<uint8_t>(~kAnnouncementOwed);
  }
  std::vector<hw_kv_event> after_failure;
  if ((owed & kForgettingOwed) != 0 && !events.empty()) {
    after_failure.reserve(events.size() + 1);
    after_failure.push_back(hw_kv_event{0, HW_KV_EVENT_ALL_REMOVED, 0});
    after_failure.insert(after_failure.end(), events.begin(), events.end());
  }
  const uint8_t this_call = events.empty() ? kAnnouncementOwed : kForgettingOwed;
  try {
    call_kv_events(engine, after_failure.empty() ? events : after_failure);
  } catch (...) {
    owed |= this_call;
    throw;
  }
  owed &= static_cast<uint8_t>(~this_call);
}

void RouterInstance::call_kv_events(uint32_t engine, std::span<const hw_kv_event> events) {
  hw_status status{};
  const int32_t code = call_plugin(kRouter, name_, "kv_events", [&] {
    return kv_events_(handle_, engine, events.empty() ? nullptr : events.data(),
                      static_cast<uint32_t>(events.size()), &status);
  });
  if (code != HW_OK) {
    throw Error(fmt::format("router '{}' kv_events() for engine {} failed with status code {}: {}",
                            name_, engine, code, plugin_message(status)),
                HW_INTERNAL);
  }
}

RouterInstance::~RouterInstance() {
  if (handle_ != nullptr)
    call_plugin_quietly(kRouter, name_, "destroy", [&] { table_->destroy(handle_); });
}

hw_route_decision RouterInstance::route(const hw_route_request& request,
                                        std::span<const hw_engine_load> engines,
                                        std::span<const uint64_t> prefix_hashes) {
  hw_route_decision decision{};
  hw_status status{};
  const auto count = static_cast<uint32_t>(engines.size());
  const int32_t code =
      route_with_prefix_ != nullptr
          ? call_plugin(kRouter, name_, "route_with_prefix",
                        [&] {
                          const hw_route_prefix prefix{
                              sizeof(hw_route_prefix), kRoutePrefixPieceTokens,
                              prefix_hashes.data(), static_cast<uint32_t>(prefix_hashes.size())};
                          return route_with_prefix_(handle_, &request, &prefix, engines.data(),
                                                    count, &decision, &status);
                        })
          : call_plugin(kRouter, name_, "route", [&] {
              return table_->route(handle_, &request, engines.data(), count, &decision, &status);
            });
  if (code == HW_UNAVAILABLE || code < HW_OK || code > HW_DEADLINE_EXCEEDED) {
    check_status(code, status, "router '" + name_ + "'");
  }
  if (code != HW_OK) {
    // A router refuses with HW_UNAVAILABLE alone (router.places_on_live_engines); its other codes
    // are failures, which must not reach the client as its own error (400, 404, 429).
    throw Error(fmt::format("router '{}' route() failed with status code {}: {}", name_, code,
                            plugin_message(status)),
                HW_INTERNAL);
  }
  // The decision's engines must lie inside what the plugin says it wrote: one that returned OK
  // without filling it (struct_size 0) would otherwise send everything to engine 0, silently.
  constexpr uint32_t kDecisionEngines =
      offsetof(hw_route_decision, decode_engine) + sizeof(decision.decode_engine);
  if (decision.struct_size < kDecisionEngines) {
    throw PluginContractError(
        fmt::format("router '{}' route() returned HW_OK with a decision of struct_size {}, too "
                    "small to hold its engines ({} bytes): it must fill hw_route_decision",
                    name_, decision.struct_size, kDecisionEngines),
        HW_INTERNAL);
  }
  if (decision.prefill_engine >= engines.size() || decision.decode_engine >= engines.size()) {
    throw Error(
        fmt::format("router '{}' chose prefill engine {} and decode engine {}, but the "
                    "deployment's engines are numbered 0 to {}",
                    name_, decision.prefill_engine, decision.decode_engine, engines.size() - 1),
        HW_INTERNAL);
  }
  // Lengths first: the conformance suite judges a RolePlacementError as a placement (its roles),
  // and a placement that also does not fit must still count against router.holds_request_lengths.
  if (reads_model_lengths_) check_fits(request, decision);
  check_roles(request, decision, engines);
  return decision;
}

void RouterInstance::check_roles(const hw_route_request& request, const hw_route_decision& decision,
                                 std::span<const hw_engine_load> engines) const {
  const int32_t prefill_role = engines[decision.prefill_engine].role;
  const int32_t decode_role = engines[decision.decode_engine].role;
  std::string broken;
  if (decision.prefill_engine == decision.decode_engine) {
    // A prefill engine hands every request's KV on; decoding one itself would serve it with the
    // prefill engine's limits and report it as a prefill engine's work. A decode engine may
    // prefill a request itself (a short prompt, or no prefill engine alive).
    if (prefill_role == HW_ENGINE_ROLE_PREFILL) {
      broken = fmt::format("engine{} for both prefill and decode, but its role is \"prefill\"",
                           decision.prefill_engine);
    }
  } else if (prefill_role != HW_ENGINE_ROLE_PREFILL || decode_role != HW_ENGINE_ROLE_DECODE) {
    // Only a prefill engine's step hands KV over, and only a decode engine takes it in.
    broken = fmt::format(
        "engine{} (role \"{}\") for prefill and engine{} (role \"{}\") for decode; a request "
        "split between two engines prefills on a \"prefill\" engine and decodes on a \"decode\" "
        "engine",
        decision.prefill_engine, engine_role_name(prefill_role), decision.decode_engine,
        engine_role_name(decode_role));
  }
  if (broken.empty()) return;
  throw RolePlacementError(fmt::format("router '{}' placed request {} on {} (router.honours_roles "
                                       "in docs/conformance.md)",
                                       name_, request.id, broken),
                           decision);
}

void RouterInstance::check_fits(const hw_route_request& request,
                                const hw_route_decision& decision) const {
  const uint64_t whole = uint64_t{request.prompt_tokens} + request.max_output_tokens;
  // The prefill engine too: an engine admits a request, prefill-only or not, only when all of it
  // fits (Engine::add_request, and an engine process's admission).
  for (const uint32_t engine : {decision.prefill_engine, decision.decode_engine}) {
    // 0: not known yet (an engine process that has not answered), which the router takes as
    // holding any request; the engine itself refuses what it cannot hold.
    const uint32_t length = engine < limits_.size() ? limits_[engine].max_model_len : 0;
    if (length != 0 && whole > length) {
      throw Error(fmt::format("router '{}' placed request {} ({} prompt + {} output tokens) on "
                              "engine{}, whose max_model_len {} cannot hold it",
                              name_, request.id, request.prompt_tokens, request.max_output_tokens,
                              engine, length),
                  HW_INTERNAL);
    }
  }
}

KvTransportInstance::KvTransportInstance(const PluginChoice& choice, const HostServices& host)
    : table_(&choice.plugin->table<hw_kv_transport_table>()), name_(choice.plugin->short_name()) {
  hw_status status{};
  check_status(
      call_plugin(
          kTransport, name_, "create",
          [&] { return table_->create(host.table(), choice.options->view(), &handle_, &status); }),
      status, choice.where + ": KV transport '" + name_ + "' create");
  require_handle(handle_, choice.where + ": KV transport '" + name_ + "' create");
  // Read only when the plugin's table is long enough to hold them (built for ABI 1.2 or later).
  has_peer_links_ = table_->struct_size >=
                        offsetof(hw_kv_transport_table, peer_close) + sizeof(table_->peer_close) &&
                    table_->peer_rendezvous != nullptr && table_->peer_join != nullptr &&
                    table_->peer_state != nullptr && table_->peer_post != nullptr &&
                    table_->peer_close != nullptr;
}

KvTransportInstance::~KvTransportInstance() {
  if (handle_ != nullptr)
    call_plugin_quietly(kTransport, name_, "destroy", [&] { table_->destroy(handle_); });
}

uint64_t KvTransportInstance::start(const hw_kv_transfer& transfer) {
  uint64_t handle = 0;
  hw_status status{};
  const int32_t code = call_plugin(kTransport, name_, "start", [&] {
    return table_->start(handle_, &transfer, &handle, &status);
  });
  if (code != HW_OK) check_status(code, status, "KV transport '" + name_ + "' start");
  return handle;
}

KvTransportInstance::Progress KvTransportInstance::poll(uint64_t handle) {
  Progress progress{HW_TRANSFER_PENDING, 0.0};
  hw_status status{};
  const int32_t code = call_plugin(kTransport, name_, "poll", [&] {
    return table_->poll(handle_, handle, &progress.state, &progress.seconds, &status);
  });
  if (code != HW_OK) check_status(code, status, "KV transport '" + name_ + "' poll");
  if (progress.state != HW_TRANSFER_PENDING && progress.state != HW_TRANSFER_DONE &&
      progress.state != HW_TRANSFER_FAILED) {
    throw PluginContractError("KV transport '" + name_ + "' poll: answered state " +
                                  std::to_string(progress.state) +
                                  ", which is none of PENDING (0), DONE (1) and FAILED (2)",
                              HW_INTERNAL);
  }
  // The engines' clock adds it (a simulated transfer's) or reports it (a measured one's): a
  // negative or non-finite duration would move a virtual clock backwards or poison every mean.
  if (progress.state == HW_TRANSFER_DONE &&
      !(std::isfinite(progress.seconds) && progress.seconds >= 0.0)) {
    throw PluginContractError(fmt::format("KV transport '{}' poll: answered DONE with a duration "
                                          "of {} s (a duration is finite and at least 0)",
                                          name_, progress.seconds),
                              HW_INTERNAL);
  }
  return progress;
}

void KvTransportInstance::require_peer_links() const {
  if (!has_peer_links_) {
    throw Error("KV transport '" + name_ + "' has no peer links (KV between processes)",
                HW_INVALID_ARGUMENT);
  }
}

std::vector<uint8_t> KvTransportInstance::peer_rendezvous() {
  require_peer_links();
  std::vector<uint8_t> id(HW_PEER_ID_MAX);
  uint64_t size = 0;
  hw_status status{};
  check_status(
      call_plugin(
          kTransport, name_, "peer_rendezvous",
          [&] { return table_->peer_rendezvous(handle_, id.data(), id.size(), &size, &status); }),
      status, "KV transport '" + name_ + "' peer_rendezvous");
  // More than it was given room for: what it wrote is not the id it means (the peer would get a
  // cut one and fail obscurely), so it is refused here, naming the transport.
  if (size > id.size()) {
    throw PluginContractError(
        fmt::format("KV transport '{}' peer_rendezvous: says it wrote {} bytes, more than the {} "
                    "it was given (HW_PEER_ID_MAX)",
                    name_, size, id.size()),
        HW_INTERNAL);
  }
  id.resize(size);
  return id;
}

uint64_t KvTransportInstance::peer_join(const std::vector<uint8_t>& id, int32_t rank,
                                        const hw_memory_desc& memory) {
  require_peer_links();
  uint64_t link = 0;
  hw_status status{};
  check_status(call_plugin(kTransport, name_, "peer_join",
                           [&] {
                             return table_->peer_join(handle_, id.data(), id.size(), rank,
                                                      memory.kind, memory.device_id, &link,
                                                      &status);
                           }),
               status, "KV transport '" + name_ + "' peer_join");
  return link;
}

int32_t KvTransportInstance::peer_state(uint64_t link) {
  require_peer_links();
  int32_t state = HW_TRANSFER_FAILED;
  hw_status status{};
  const int32_t code = call_plugin(kTransport, name_, "peer_state", [&] {
    return table_->peer_state(handle_, link, &state, &status);
  });
  if (code != HW_OK) check_status(code, status, "KV transport '" + name_ + "' peer_state");
  return state;
}

uint64_t KvTransportInstance::peer_post(uint64_t link, hw_peer_direction direction,
                                        const hw_memory_desc& memory,
                                        std::span<const uint32_t> blocks) {
  require_peer_links();
  uint64_t handle = 0;
  hw_status status{};
  check_status(call_plugin(kTransport, name_, "peer_post",
                           [&] {
                             return table_->peer_post(
                                 handle_, link, direction, &memory, blocks.data(),
                                 static_cast<uint32_t>(blocks.size()), &handle, &status);
                           }),
               status, "KV transport '" + name_ + "' peer_post");
  return handle;
}

void KvTransportInstance::peer_close(uint64_t link) {
  if (!has_peer_links_) return;
  // Called from destructors and failure paths: an escaping exception is logged, not thrown.
  call_plugin_quietly(kTransport, name_, "peer_close", [&] { table_->peer_close(handle_, link); });
}

}  // namespace headway::core
