// Router for a deployment of exactly one engine: every request goes there while it is alive.
#include <algorithm>
#include <headway/plugin.hpp>
#include <string>

namespace {

class SingleRouter final : public headway::sdk::Router {
 public:
  SingleRouter(const headway::sdk::Host&, const headway::sdk::Options&,
               std::span<const hw_engine_load> engines) {
    if (engines.size() != 1) {
      // The advice follows the engines' roles, to a router that serves them.
      const auto any = [&](int32_t role) {
        return std::any_of(engines.begin(), engines.end(),
                           [&](const hw_engine_load& e) { return e.role == role; });
      };
      const char* advice = " (use least_loaded or length)";
      if (any(HW_ENGINE_ROLE_PREFILL)) {
        advice = " (use disaggregated for prefill and decode engines)";
      } else if (any(HW_ENGINE_ROLE_DECODE)) {
        advice = any(HW_ENGINE_ROLE_MIXED)
                     ? " (use least_loaded, which leaves the decode engines idle, or give the "
                       "mixed engines role = \"prefill\" and use disaggregated)"
                     : " (use disaggregated with local_prefill_max_tokens > 0: there is no "
                       "prefill engine)";
      }
      throw headway::sdk::Error(HW_INVALID_ARGUMENT,
                                "router 'single' serves exactly one engine, the deployment has " +
                                    std::to_string(engines.size()) + advice);
    }
    // A prefill engine hands every request's KV on, and a decode engine takes KV in: alone, one
    // would serve every request as a mixed engine does, under a role that says otherwise.
    if (engines[0].role != HW_ENGINE_ROLE_MIXED) {
      throw headway::sdk::Error(
          HW_INVALID_ARGUMENT,
          std::string("router 'single' serves one mixed engine, and the deployment's engine has "
                      "role = \"") +
              (engines[0].role == HW_ENGINE_ROLE_PREFILL ? "prefill" : "decode") +
              "\" (leave role out, or pair prefill and decode engines under router "
              "'disaggregated')");
    }
  }

  hw_route_decision route(const hw_route_request&,
                          std::span<const hw_engine_load> engines) override {
    if (!engines[0].alive) throw headway::sdk::Error(HW_UNAVAILABLE, "the only engine is down");
    return hw_route_decision{sizeof(hw_route_decision), engines[0].engine_index,
                             engines[0].engine_index, 0};
  }
};

}  // namespace

HEADWAY_EXPORT_ROUTER(SingleRouter, "org.headway.router.single", "single", "0.1.0",
                      "Sends every request to the deployment's only engine",
                      headway::sdk::no_options)
