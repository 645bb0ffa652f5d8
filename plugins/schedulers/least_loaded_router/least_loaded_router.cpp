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
    if (engines.empty()) throw headway::sdk::Error(HW_INVALID_ARGUMENT, "no engines to route to");
    // It places requests on mixed engines only: without one, every request would be refused.
    const bool any_mixed = std::any_of(engines.begin(), engines.end(), [](const hw_engine_load& e) {
      return e.role == HW_ENGINE_ROLE_MIXED;
    });
    if (!any_mixed) {
      const bool any_prefill =
          std::any_of(engines.begin(), engines.end(),
                      [](const hw_engine_load& e) { return e.role == HW_ENGINE_ROLE_PREFILL; });
      throw headway::sdk::Error(
          HW_INVALID_ARGUMENT,
          std::string("router 'least_loaded' places requests on mixed engines, and the "
                      "deployment's are all prefill or decode engines (use router "
                      "'disaggregated' for them") +
              (any_prefill ? ")"
                           : ", with local_prefill_max_tokens > 0: there is no prefill engine)"));
    }
    // Served, but not all: an operator who left the router out of a file with decode engines
    // beside mixed ones should hear that those take nothing.
    std::string idle;
    for (const hw_engine_load& e : engines) {
      if (e.role == HW_ENGINE_ROLE_MIXED) continue;
      idle += (idle.empty() ? "" : ", ") + std::to_string(e.engine_index);
    }
    if (!idle.empty()) {
      host.log(HW_LOG_WARN,
               "router 'least_loaded' places requests on mixed engines only: engine(s) " + idle +
                   " (prefill or decode) will take none (leave role out to make them mixed, or "
                   "serve prefill and decode engines under router 'disaggregated')");
    }
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
