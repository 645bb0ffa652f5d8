// How a disaggregated deployment's requests move between the driver threads of an in-process
// cluster: the prefill engine's driver hands a prefilled request (its state, its KV block list and
// its engine's KV memory) to the decode engine's driver, which reserves room, has the deployment's
// KV transport copy the blocks, continues the request, and tells the prefill driver to free its
// copy. The drivers never touch each other's engine; they talk through each other's inboxes.
//
// Ownership: borrows the transport (owned by the cluster) and the drivers (owned by the service).
// Threading: every method is safe from any thread once set_drivers() and set_peer_parts() ran
// (before the drivers start). The transport's calls take no lock here: abi.h lets any thread call
// any function of a KV transport instance at any time (the plugin synchronises), and a call may be
// slow (a copy, a link that waits, NCCL), so a lock held across it made every other driver's
// hand-off and poll, and so its step, wait behind one slow transfer. (A plugin may still order
// its own calls: nccl holds its lock while it drains a link's streams after aborting the link's
// communicator, on a failure or a close with transfers in flight.) The order of calls that must
// be ordered (a link's posts) is their callers' (kv_links.h).
#pragma once

#include <headway/core/engine.h>
#include <headway/core/plugin_instances.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "in_flight_request.h"

namespace headway::serving {

class EngineDriver;
class HeldKv;
class KvLinks;

// A prefilled request on its way to a decode engine's driver: from a prefill engine's driver in
// this process, or staged in shared memory by another process (`staged`).
struct Handoff {
  core::IncomingTransfer request;  // request.record points into state
  std::vector<uint32_t> source_blocks;
  hw_memory_desc source_kv{};
  uint32_t source_engine = 0;
  std::optional<KvStage> staged;  // set: the KV waits there, no driver here holds it
  // When its KV was ready to move here, on the service's wall clock (its prefill engine's step end,
  // or a continuation's arrival at this process): its wait for room counts from here.
  double ready = 0.0;
  std::unique_ptr<InFlightRequest> state;
};

class KvHandoff {
 public:
  explicit KvHandoff(core::KvTransportInstance& transport) : transport_(transport) {}

  void set_drivers(std::vector<EngineDriver*> drivers) { drivers_ = std::move(drivers); }
  EngineDriver& driver(uint32_t engine) const { return *drivers_.at(engine); }

  // The transport's start()/poll(), from any thread, concurrently.
  uint64_t start(const hw_kv_transfer& transfer);
  core::KvTransportInstance::Progress poll(uint64_t handle);
  const std::string& transport_name() const { return transport_.name(); }

  // The transport's peer links (KV between processes, kv_links.h), from any thread as well.
  bool has_peer_links() const { return transport_.has_peer_links(); }
  std::vector<uint8_t> peer_rendezvous();
  uint64_t peer_join(const std::vector<uint8_t>& id, int32_t rank, const hw_memory_desc& memory);
  int32_t peer_state(uint64_t link);
  uint64_t peer_post(uint64_t link, hw_peer_direction direction, const hw_memory_desc& memory,
                     std::span<const uint32_t> blocks);
  void peer_close(uint64_t link);

  // Engine processes whose transport has peer links: the links (both sides), and the KV held for
  // them when this process prefills with kv_handoff = "link". Null otherwise. Set before the
  // drivers start; owned by the service.
  void set_peer_parts(KvLinks* links, HeldKv* held) {
    links_ = links;
    held_ = held;
  }
  KvLinks* links() const { return links_; }
  HeldKv* held() const { return held_; }

 private:
  core::KvTransportInstance& transport_;
  std::vector<EngineDriver*> drivers_;
  KvLinks* links_ = nullptr;
  HeldKv* held_ = nullptr;
};

}  // namespace headway::serving
