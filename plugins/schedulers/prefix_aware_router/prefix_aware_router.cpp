// Router that sends a request to the engine whose prefix cache most likely holds the beginning of
// its prompt, unless that engine is loaded by more than the beginning would save: a multi-turn
// chat's next turn goes where its conversation so far is cached, and questions about one document
// go where the document is, instead of each engine computing and caching every beginning.
//
// The engine chosen has the smallest
//     outstanding_tokens - cached_token_weight (2) * (tokens of the prompt's beginning it holds)
// among the live mixed engines with room that hold the request (least_loaded's rules, and its
// choice when no engine holds any of the beginning). Ties go round-robin. What an engine holds is
// a belief (the SDK's PrefixAffinity): the beginnings of the requests this router sent there, the
// most recent kept up to the engine's KV cache size. An engine seen down is forgotten.
#include <cstdint>
#include <headway/plugin.hpp>
#include <string>

namespace {

constexpr hw_option_spec kOptions[] = {
    headway::sdk::cached_token_weight_option(
        "How many outstanding tokens one token of a prompt's beginning, cached on an engine, is "
        "worth when choosing it: the engine with the fewest outstanding tokens less this times the "
        "cached tokens wins. 0 = least_loaded."),
    headway::sdk::tracked_tokens_option(),
    headway::sdk::kv_events_option(),
};

class PrefixAwareRouter final : public headway::sdk::Router {
 public:
  PrefixAwareRouter(const headway::sdk::Host& host, const headway::sdk::Options& options,
                    std::span<const hw_engine_load> engines)
      : affinity_(headway::sdk::PrefixAffinity::from_options(options)) {
    headway::sdk::check_mixed_engines(host, engines, "prefix_aware");
  }

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    return route_with_prefix(request, {}, engines);
  }

  void on_kv_events(uint32_t engine_index, std::span<const hw_kv_event> events) override {
    affinity_.apply(engine_index, events);
  }

  hw_route_decision route_with_prefix(const hw_route_request& request,
                                      const headway::sdk::RoutePrefix& prefix,
                                      std::span<const hw_engine_load> engines) override {
    affinity_.observe(prefix, engines);
    const uint64_t whole = whole_length(request);
    const auto live = [&](const hw_engine_load& e) {
      return e.alive && e.role == HW_ENGINE_ROLE_MIXED && holds(e, whole);
    };
    const auto key = [&](const hw_engine_load& e) {
      return static_cast<double>(e.outstanding_tokens) - affinity_.credit(e);
    };
    size_t best = headway::sdk::pick_least_loaded(
        engines, cursor_, [&](const hw_engine_load& e) { return live(e) && has_room(e); }, key);
    // Every queue full: the best anyway, where the host refuses it with a 429 (retry); nothing is
    // recorded then, since the engine computes nothing of it.
    bool refused = false;
    if (best == engines.size()) {
      best = headway::sdk::pick_least_loaded(engines, cursor_, live, key);
      refused = true;
    }
    if (best == engines.size()) {
      throw headway::sdk::Error(HW_UNAVAILABLE, "no live mixed-role engine holds a request of " +
                                                    std::to_string(whole) +
                                                    " tokens (prompt + max_tokens)");
    }
    const uint32_t engine = engines[best].engine_index;
    if (!refused) affinity_.record(engine, prefix);
    return hw_route_decision{sizeof(hw_route_decision), engine, engine, 0};
  }

 private:
  headway::sdk::PrefixAffinity affinity_;
  size_t cursor_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(PrefixAwareRouter, "org.headway.router.prefix_aware", "prefix_aware", "0.1.0",
                      "Where the prompt's beginning is cached, unless more loaded than it saves",
                      kOptions)
