// The engines of a deployment and the router in front of them, in one process.
//
// Ownership: the cluster owns its engines, its router instance and the host services of the
// router. Threading: route(), submit() and the transfer calls happen on the thread that drives
// the cluster (the simulator), or, in a driver that steps each engine on a thread of its own
// (serving), route(request, loads) is called under that driver's lock while each Engine is only
// ever touched by its own thread.
#pragma once

#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/engine.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/link_schedule.h>
#include <headway/core/plugin_instances.h>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace headway::core {

class Cluster {
 public:
  explicit Cluster(
      const DeploymentConfig& config,
      std::chrono::steady_clock::time_point wall_origin = std::chrono::steady_clock::now());
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  size_t size() const { return engines_.size(); }
  Engine& engine(size_t i) { return *engines_[i]; }
  const Engine& engine(size_t i) const { return *engines_[i]; }
  // True when the engines run on the virtual clock (simulated model).
  bool is_virtual() const { return clock_->is_virtual(); }
  // The router's clock: the time of the event being handled.
  Clock& clock() { return *clock_; }

  // The longest request (prompt + max_output_tokens) the deployment admits: the largest
  // max_model_len of its engines that finish requests (mixed and decode; a prefill engine hands
  // its requests on) when the router places requests by their length (an ABI 1.7 router), else
  // the smallest of all, which any engine it picks holds.
  uint32_t admitted_max_model_len() const;
  bool router_reads_model_lengths() const { return router_->reads_model_lengths(); }
  // Whether route()'s prefix_hashes are worth computing (core::route_prefix_hashes of the prompt's
  // ids): the router reads how prompts begin (ABI 1.8) and some engine caches prefixes. With
  // prefix caching off everywhere no engine holds a beginning, and a router given none places
  // requests as if it did not read them.
  bool hashes_prefixes() const { return hashes_prefixes_; }

  // Asks the router where a request goes, with every engine's current load. Throws Error
  // (RouterInstance::route).
  hw_route_decision route(const hw_route_request& request,
                          std::span<const uint64_t> prefix_hashes = {});
  // The same with loads the caller gathered: a driver with one thread per engine has each engine
  // publish its load from its own thread (Engine::load() may not be read from another). Reads no
  // engine, so any thread may call it; calls must not overlap (the router plugin is not
  // reentrant): the caller serialises them.
  hw_route_decision route(const hw_route_request& request, std::span<const hw_engine_load> loads,
                          std::span<const uint64_t> prefix_hashes = {});
  // For such a driver: whether the engines keep KV events (the router reads them, ABI 1.9), and
  // the call that hands one engine's to the router (taken on the engine's thread with
  // Engine::take_kv_events), under the same serialisation as route(), before it. route() without
  // loads hands them itself.
  bool reads_kv_events() const { return router_->reads_kv_events(); }
  // Has every engine that caches prefixes keep KV events whether or not the router reads them:
  // an engine process's, for the router process in front of it. Before the first request.
  void keep_kv_events() {
    for (const auto& engine : engines_) engine->keep_kv_events();
  }
  void kv_events(uint32_t engine, std::span<const hw_kv_event> events) {
    router_->kv_events(engine, events);
  }

  // Routes a request (its prompt's ids, where it has them, tell a router that reads prefixes how
  // it begins) and queues it on its engine: the prefill engine of a disaggregated placement
  // (which hands it over after its first token), or the one engine serving it. Returns the engine
  // it was queued on. Throws Error when it cannot be placed.
  uint32_t submit(NewRequest request, const hw_route_request& route);

  // --- KV transfers of disaggregated requests (driven by the simulator or the serving loop) ---
  // After engine `e` stepped: its requests whose prefill finished join the transfer queue of their
  // decode engine, which starts what fits (`now` is the prefill engine's clock).
  void collect_prefilled(size_t e, double now);
  // Starts queued transfers to engine `d` while it has KV room (FIFO; the rest wait: backpressure).
  void start_transfers(size_t d, double now);
  // Earliest completion time among transfers in flight, if any.
  std::optional<double> next_transfer_completion() const;
  // Completes the transfers in flight that are done by time `t` (their KV is usable on the decode
  // engine from then on, and the prefill engine frees its copy); returns how many completed.
  size_t complete_transfers(double t);
  // Transfers started / waiting for room / in flight.
  uint64_t transfers_started() const { return transfers_started_; }
  size_t transfers_waiting() const;
  size_t transfers_in_flight() const { return in_flight_.size(); }

  void set_alive(size_t engine, bool alive) { alive_[engine] = alive; }
  // The deployment's KV transport; null without [kv_transport]. A serving loop that moves KV
  // between engine threads itself (rather than through the calls above) uses it directly.
  KvTransportInstance* transport() { return transport_.get(); }
  const std::string& router_name() const { return router_->name(); }
  // The host services of the router and of the KV transport (null without [kv_transport]).
  HostServices& router_host() { return *router_host_; }
  HostServices* transport_host() { return transport_host_.get(); }

 private:
  // The error a transfer the transport reported FAILED stops a simulation with.
  Error transfer_failure(uint64_t id, uint32_t source, size_t destination) const;

  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<bool> alive_;
  std::vector<hw_engine_load> loads_;
  std::vector<uint64_t> prefix_hashes_;  // submit()'s scratch
  std::vector<hw_kv_event> kv_events_;   // route()'s scratch
  bool hashes_prefixes_ = false;
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<HostServices> router_host_;
  std::unique_ptr<RouterInstance> router_;
  std::unique_ptr<HostServices> transport_host_;
  std::unique_ptr<KvTransportInstance> transport_;

  struct PendingTransfer {
    uint64_t id;
    uint32_t source;
    double ready;  // when the prefill finished
  };
  struct InFlightTransfer {
    uint64_t id;
    uint32_t source;
    uint32_t destination;
    uint64_t handle;
    double start;
    double done = 0.0;      // start + duration, once the transport reported it
    bool finished = false;  // the transport reported completion (or nothing was copied)
    RequestRecord* record;
  };
  // A pending transfer whose every block the destination's prefix cache held: it goes in flight
  // as finished, without the transport.
  void arrive_without_copy(const PendingTransfer& p, size_t d, RequestRecord* record);
  // A disaggregated request from its routing until it reaches its decode engine's queue: where it
  // goes, and the output tokens it brings there.
  struct HeadedTo {
    uint32_t engine;
    uint32_t tokens;
  };
  // What is headed to one decode engine and not in its load yet (still prefilling elsewhere, or
  // waiting for or in its KV transfer): route() adds it, so that a burst spreads over the decode
  // engines instead of all landing on the one that looked least loaded before any arrived
  // (helper-170: 20 of 20 on one of two).
  struct Expected {
    uint32_t requests = 0;
    uint64_t tokens = 0;
  };
  // Drops `id` from decode_engine_of_ and what it added to expected_ (it arrived, or ended).
  void no_longer_headed(uint64_t id);
  std::unordered_map<uint64_t, HeadedTo> decode_engine_of_;  // disaggregated requests in flight
  std::vector<Expected> expected_;                           // per engine
  std::vector<std::deque<PendingTransfer>> pending_;         // per decode engine
  std::vector<InFlightTransfer> in_flight_;
  // Simulated transfers only: when each engine's outgoing and incoming link is busy. A transfer
  // takes both for its modelled duration (link_schedule.h), so transfers from one prefill engine,
  // or into one decode engine, take turns instead of each having the link's whole bandwidth.
  std::vector<LinkSchedule> outgoing_link_;
  std::vector<LinkSchedule> incoming_link_;
  // Places a simulated transfer on its links: from its earliest start to the first gap both have.
  void place_on_links(InFlightTransfer& flight, double seconds);
  std::vector<uint64_t> prefilled_scratch_;
  std::vector<uint64_t> finished_scratch_;
  uint64_t transfers_started_ = 0;
};

}  // namespace headway::core
