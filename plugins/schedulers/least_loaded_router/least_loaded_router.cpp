// Router that sends each request to the live engine with the fewest outstanding tokens (prompt
// tokens still to prefill plus output tokens still to generate); ties go round-robin so that an
// idle cluster spreads its first requests instead of piling them on engine 0. Engines whose
// waiting queue is full (max_waiting) come last: the host would refuse the request there (429)
// while another engine could take it. An engine whose max_model_len cannot hold the request
// (prompt + max_tokens) is never picked: engines of one deployment may hold different lengths.
#include <algorithm>
#include <cstdint>
#include <headway/plugin.hpp>
#include <string>

namespace {

class LeastLoadedRouter final : public headway::sdk::Router {
 public:
  LeastLoadedRouter(const headway::sdk::Host& host, const headway::sdk::Options&,
                    std::span<const hw_engine_load> engines) {
    headway::sdk::check_mixed_engines(host, engines, "least_loaded");
  }

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    const uint64_t whole = whole_length(request);
    const auto live = [&](const hw_engine_load& e) {
      return e.alive && e.role == HW_ENGINE_ROLE_MIXED && holds(e, whole);
    };
    size_t best = headway::sdk::pick_least_loaded(
        engines, cursor_, [&](const hw_engine_load& e) { return live(e) && has_room(e); },
        headway::sdk::outstanding_tokens);
    // Every queue full: the least loaded anyway, where the host refuses it with a 429 (retry).
    if (best == engines.size()) {
      best =
          headway::sdk::pick_least_loaded(engines, cursor_, live, headway::sdk::outstanding_tokens);
    }
    if (best == engines.size()) {
      throw headway::sdk::Error(HW_UNAVAILABLE, "no live mixed-role engine holds a request of " +
                                                    std::to_string(whole) +
                                                    " tokens (prompt + max_tokens)");
    }
    uint32_t engine = engines[best].engine_index;
    return hw_route_decision{sizeof(hw_route_decision), engine, engine, 0};
  }

 private:
  size_t cursor_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(LeastLoadedRouter, "org.headway.router.least_loaded", "least_loaded", "0.1.0",
                      "Fewest outstanding tokens; ties round-robin", headway::sdk::no_options)
