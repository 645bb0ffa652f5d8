// RAII owners of plugin instances: each wraps the C handle of one kind, calls its table and turns
// failure statuses into Error exceptions that name the plugin.
//
// Ownership: an instance owns its handle and destroys it exactly once; the plugin library (owned
// by the registry) outlives it. Threading: as the kind's ABI comment says; these wrappers add no
// locking.
#pragma once

#include <headway/abi.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headway::core {

// The plugin call running on this thread, as "scheduler 'chunked' schedule()", or empty when none
// is: for a std::terminate handler, which has only the thread to go by when a plugin's code ends
// the process (a thread it never joined, an exception out of a noexcept function). Every call the
// instances below make through a plugin's table sets it.
std::string current_plugin_call();
// The same without allocating, for a signal handler (async-signal-safe: reads this thread's mark):
// false when no plugin call runs on this thread; else the kind ("scheduler", ...), the plugin's
// name and the function, valid while the call runs.
bool current_plugin_call_parts(const char*& kind, std::string_view& name,
                               const char*& function) noexcept;

class SchedulerInstance {
 public:
  SchedulerInstance(const PluginChoice& choice, const hw_engine_facts& facts,
                    const HostServices& host);
  ~SchedulerInstance();
  SchedulerInstance(const SchedulerInstance&) = delete;
  SchedulerInstance& operator=(const SchedulerInstance&) = delete;

  const hw_scheduler_limits& limits() const { return limits_; }
  // Throws Error when the plugin reports a failure.
  void schedule(const hw_scheduler_snapshot& snapshot, hw_scheduler_plan& plan);
  const std::string& name() const { return name_; }

 private:
  const hw_scheduler_table* table_;
  hw_scheduler* handle_ = nullptr;
  hw_scheduler_limits limits_{};
  std::string name_;
};

class ModelInstance {
 public:
  ModelInstance(const PluginChoice& choice, const std::string& config_dir,
                const HostServices& host);
  ~ModelInstance();
  ModelInstance(const ModelInstance&) = delete;
  ModelInstance& operator=(const ModelInstance&) = delete;

  const hw_model_info& info() const { return info_; }
  void init_kv(uint32_t blocks, uint32_t block_size);
  hw_memory_desc kv_memory();
  void forward(const hw_model_batch& batch, hw_model_output& output);
  const std::string& name() const { return name_; }

 private:
  const hw_model_table* table_;
  hw_model* handle_ = nullptr;
  hw_model_info info_{};
  std::string name_;
};

// A router's decision that breaks the engines' roles (router.honours_roles): thrown by
// RouterInstance::route() with code HW_INTERNAL, carrying the decision so that the conformance
// suite can judge it as that rule rather than as a failed call.
class RolePlacementError : public Error {
 public:
  RolePlacementError(const std::string& message, const hw_route_decision& decision)
      : Error(message, HW_INTERNAL), decision_(decision) {}
  const hw_route_decision& decision() const noexcept { return decision_; }

 private:
  hw_route_decision decision_;
};

class RouterInstance {
 public:
  // Creates the router and tells it `limits` (limits[i] for engines[i]; empty: every engine
  // unbounded), as abi.h promises before the first route(). Throws Error.
  RouterInstance(const PluginChoice& choice, std::span<const hw_engine_load> engines,
                 const HostServices& host, std::span<const hw_engine_limits> limits = {});
  ~RouterInstance();
  RouterInstance(const RouterInstance&) = delete;
  RouterInstance& operator=(const RouterInstance&) = delete;

  // Throws Error: code HW_UNAVAILABLE when the router refused the request (no engine can take it);
  // HW_INTERNAL when it failed (any other status code, an exception, a decision out of range or
  // against the engines' roles (router.honours_roles in docs/conformance.md), or, for a router
  // that reads_model_lengths(), an engine whose max_model_len does not hold the request), which
  // is the plugin's fault, never the client's (PluginContractError for a status code abi.h does
  // not define).
  // prefix_hashes: route_prefix_hashes() of the prompt's ids (empty where they are not known),
  // passed to a router that reads them (route_with_prefix, ABI 1.8).
  hw_route_decision route(const hw_route_request& request, std::span<const hw_engine_load> engines,
                          std::span<const uint64_t> prefix_hashes = {});
  // Whether the plugin reads how prompts begin (route_with_prefix, ABI 1.8): the host computes
  // the hashes only for such a router.
  bool reads_prefixes() const { return route_with_prefix_ != nullptr; }
  // Whether the plugin reads the engines' limits (its table has set_engine_limits, ABI 1.6).
  bool reads_engine_limits() const { return set_engine_limits_ != nullptr; }
  // Whether it also reads each engine's max_model_len (built against ABI 1.7 or later), and so
  // places a request only where it fits: the host may then admit requests up to the largest
  // max_model_len of the deployment instead of the smallest.
  bool reads_model_lengths() const { return reads_model_lengths_; }
  // Tells the router what each engine admits (limits[i] for engine i); nothing for a router that
  // does not read them. Throws Error (HW_INTERNAL) when the plugin fails the call.
  void set_engine_limits(std::span<const hw_engine_limits> limits);
  // Whether the plugin reads what the engines' prefix caches store and evict (kv_events, ABI
  // 1.9): only then do engines keep the events.
  bool reads_kv_events() const { return kv_events_ != nullptr; }
  // Tells the router what engine `engine`'s cache did since the last call for it (no events: the
  // announcement that it reports, abi.h); nothing for a router that does not read them. Under
  // route()'s serialisation. Throws Error (HW_INTERNAL) when the plugin fails the call, after
  // which the router may have missed what it said: a failed announcement is made again before the
  // engine's next events, and after failed events the next ones begin with
  // HW_KV_EVENT_ALL_REMOVED.
  void kv_events(uint32_t engine, std::span<const hw_kv_event> events);
  const std::string& name() const { return name_; }

 private:
  void check_roles(const hw_route_request& request, const hw_route_decision& decision,
                   std::span<const hw_engine_load> engines) const;
  void check_fits(const hw_route_request& request, const hw_route_decision& decision) const;

  const hw_router_table* table_;
  decltype(hw_router_table::set_engine_limits) set_engine_limits_ = nullptr;
  decltype(hw_router_table::route_with_prefix) route_with_prefix_ = nullptr;
  decltype(hw_router_table::kv_events) kv_events_ = nullptr;
  // One kv_events() call into the plugin; throws Error when it fails.
  void call_kv_events(uint32_t engine, std::span<const hw_kv_event> events);
  static constexpr uint8_t kAnnouncementOwed = 1;
  static constexpr uint8_t kForgettingOwed = 2;

  bool reads_model_lengths_ = false;
  std::vector<hw_engine_limits> limits_;  // as last told, for check_fits()
  std::vector<uint8_t> kv_events_owed_;   // per engine: k*Owed after a failed kv_events()
  hw_router* handle_ = nullptr;
  std::string name_;
  std::string where_;  // the deployment's router table, for errors
};

class KvTransportInstance {
 public:
  KvTransportInstance(const PluginChoice& choice, const HostServices& host);
  ~KvTransportInstance();
  KvTransportInstance(const KvTransportInstance&) = delete;
  KvTransportInstance& operator=(const KvTransportInstance&) = delete;

  // Starts a transfer; the block lists must stay valid until poll() reports it done or failed.
  uint64_t start(const hw_kv_transfer& transfer);
  struct Progress {
    int32_t state;   // hw_transfer_state
    double seconds;  // duration once done
  };
  Progress poll(uint64_t handle);
  const std::string& name() const { return name_; }

  // Peer links (abi.h, ABI 1.2): KV between processes, each side naming its own blocks. The peer_*
  // calls throw core::Error when the plugin has none (check has_peer_links() first).
  bool has_peer_links() const { return has_peer_links_; }
  std::vector<uint8_t> peer_rendezvous();
  uint64_t peer_join(const std::vector<uint8_t>& id, int32_t rank, const hw_memory_desc& memory);
  int32_t peer_state(uint64_t link);  // hw_transfer_state
  // `blocks` must stay valid until poll() reports the returned transfer done or failed.
  uint64_t peer_post(uint64_t link, hw_peer_direction direction, const hw_memory_desc& memory,
                     std::span<const uint32_t> blocks);
  void peer_close(uint64_t link);

 private:
  void require_peer_links() const;

  const hw_kv_transport_table* table_;
  hw_kv_transport* handle_ = nullptr;
  std::string name_;
  bool has_peer_links_ = false;
};

}  // namespace headway::core
