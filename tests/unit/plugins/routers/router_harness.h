// What the router tests share: the plugin registry, engines as the deployment describes them and
// with loads, and a router instance driven through the C ABI by core::RouterInstance, as
// core::Cluster drives it. Header-only; test side.
#pragma once

#include <gtest/gtest.h>
#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/route_prefix.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../../test_support/error_of.h"

namespace headway::core::router_test {

inline constexpr uint32_t kBlock = 16;
inline constexpr uint32_t kPiece = kRoutePrefixPieceTokens;

// One registry for the whole process: it owns the libraries, which outlive every instance.
inline PluginRegistry& registry() {
  static PluginRegistry* r = new PluginRegistry();
  return *r;
}

// One engine as the deployment describes it; load fields zero, alive, 1000 free blocks of 16.
inline hw_engine_load engine(uint32_t index, int32_t role = HW_ENGINE_ROLE_MIXED,
                             const char* pool = "") {
  hw_engine_load e{};
  e.engine_index = index;
  e.role = role;
  e.pool = hw_str{pool, std::strlen(pool)};
  e.alive = 1;
  e.kv_blocks_free = 1000;
  e.kv_blocks_total = 1000;
  e.block_size = kBlock;
  return e;
}

// The same engine with a load: outstanding tokens (and queued prefill tokens, which routers that
// place prefills look at). queued_prefill defaults to the outstanding tokens.
inline hw_engine_load with_load(hw_engine_load e, uint64_t outstanding,
                                uint64_t queued_prefill = UINT64_MAX) {
  e.outstanding_tokens = outstanding;
  e.queued_prefill_tokens = queued_prefill == UINT64_MAX ? outstanding : queued_prefill;
  return e;
}

inline hw_engine_load dead(hw_engine_load e) {
  e.alive = 0;
  return e;
}

inline hw_engine_load with_free_blocks(hw_engine_load e, uint32_t free) {
  e.kv_blocks_free = free;
  return e;
}

inline hw_engine_load with_waiting(hw_engine_load e, uint32_t waiting) {
  e.waiting = waiting;
  return e;
}

// A prompt of `pieces` whole pieces of route_prefix_hashes: the ids of `beginning` (a shared
// document, say) followed by ids of its own from `own`, as the hashes a router is given.
inline std::vector<uint64_t> prompt_hashes(const std::vector<int32_t>& beginning, uint32_t pieces,
                                           int32_t own) {
  std::vector<int32_t> ids = beginning;
  ids.resize(size_t{pieces} * kPiece);
  std::iota(ids.begin() + static_cast<ptrdiff_t>(std::min(beginning.size(), ids.size())), ids.end(),
            own);
  std::vector<uint64_t> hashes;
  route_prefix_hashes(ids, hashes);
  return hashes;
}

// A beginning of `pieces` whole pieces, ids counting up from `first`.
inline std::vector<int32_t> document(int32_t first, uint32_t pieces) {
  std::vector<int32_t> ids(size_t{pieces} * kPiece);
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

// A router instance as the cluster creates it: from options written as TOML (the body of the
// router's options table), with the deployment's engines (identity only, load fields zero), and its
// own host services so that the metrics it reports can be read back.
class RouterHarness {
 public:
  RouterHarness(std::string_view plugin_file, std::string_view options_toml,
                const std::vector<hw_engine_load>& engines)
      : host_("router", &clock_) {
    const LoadedPlugin& plugin =
        registry().load_path(std::filesystem::path(HEADWAY_PLUGIN_DIR) / plugin_file);
    toml::table table = toml::parse(options_toml, std::string_view("test.toml"));
    PluginChoice choice;
    choice.where = "test.toml: router";
    choice.plugin = &plugin;
    choice.options = std::make_shared<const PluginOptions>(
        PluginOptions::from_toml(*plugin.descriptor, &table, "test.toml: router.options"));
    std::vector<hw_engine_load> deployment;
    for (const hw_engine_load& e : engines) {
      hw_engine_load identity{};
      identity.engine_index = e.engine_index;
      identity.role = e.role;
      identity.pool = e.pool;
      identity.alive = 1;
      identity.kv_blocks_total = e.kv_blocks_total;
      identity.kv_blocks_free = e.kv_blocks_total;
      identity.block_size = e.block_size;
      deployment.push_back(identity);
    }
    router_ = std::make_unique<RouterInstance>(choice, deployment, host_);
  }

  // prefix_hashes: how the prompt begins (route_prefix_hashes), for a router that reads it.
  hw_route_decision route(uint32_t prompt_tokens, const std::vector<hw_engine_load>& engines,
                          uint32_t max_output_tokens = 128,
                          std::span<const uint64_t> prefix_hashes = {}) {
    hw_route_request request{next_id_++, prompt_tokens, max_output_tokens, 0, hw_str{"test", 4}};
    return router_->route(request, engines, prefix_hashes);
  }

  // The engine a single-engine placement went to (prefill and decode on the same engine).
  uint32_t route_to_one(uint32_t prompt_tokens, const std::vector<hw_engine_load>& engines) {
    hw_route_decision d = route(prompt_tokens, engines);
    EXPECT_EQ(d.prefill_engine, d.decode_engine) << "prompt " << prompt_tokens;
    EXPECT_EQ(d.struct_size, sizeof(hw_route_decision));
    return d.decode_engine;
  }

  // Tells the router each engine's limits, as a cluster does after create(): waiting-queue
  // bounds and max_model_len (an empty list: 0, unbounded or not known, for every engine).
  void set_limits(const std::vector<uint32_t>& max_waiting,
                  const std::vector<uint32_t>& max_model_len) {
    std::vector<hw_engine_limits> limits;
    for (uint32_t e = 0; e < std::max(max_waiting.size(), max_model_len.size()); ++e) {
      limits.push_back(hw_engine_limits{sizeof(hw_engine_limits), e,
                                        e < max_waiting.size() ? max_waiting[e] : 0,
                                        e < max_model_len.size() ? max_model_len[e] : 0});
    }
    router_->set_engine_limits(limits);
  }
  void set_max_waiting(const std::vector<uint32_t>& max_waiting) { set_limits(max_waiting, {}); }
  void set_max_model_len(const std::vector<uint32_t>& max_model_len) {
    set_limits({}, max_model_len);
  }
  bool reads_engine_limits() const { return router_->reads_engine_limits(); }
  bool reads_model_lengths() const { return router_->reads_model_lengths(); }
  bool reads_prefixes() const { return router_->reads_prefixes(); }
  bool reads_kv_events() const { return router_->reads_kv_events(); }
  // What engine `engine`'s prefix cache stored (or evicted), as the host tells it (ABI 1.9); no
  // events: the announcement that the engine reports.
  void kv_events(uint32_t engine, int32_t kind, std::span<const uint64_t> pieces) {
    std::vector<hw_kv_event> events;
    for (const uint64_t piece : pieces) events.push_back(hw_kv_event{piece, kind, 0});
    router_->kv_events(engine, events);
  }
  void announce_kv_events(uint32_t engine) { router_->kv_events(engine, {}); }

  double counter(const std::string& name) const {
    const auto counters = host_.counters();
    auto it = counters.find(name);
    return it == counters.end() ? 0.0 : it->second;
  }

 private:
  VirtualClock clock_;
  HostServices host_;
  std::unique_ptr<RouterInstance> router_;
  uint64_t next_id_ = 1;
};

using ::headway::test::error_of;

}  // namespace headway::core::router_test
