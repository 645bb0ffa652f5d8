// Router for a deployment of exactly one engine: every request goes there while it is alive.
#include <headway/plugin.hpp>
#include <string>

namespace {

class SingleRouter final : public headway::sdk::Router {
 public:
  SingleRouter(const headway::sdk::Host&, const headway::sdk::Options&,
               std::span<const hw_engine_load> engines) {
    if (engines.size() != 1) {
      throw headway::sdk::Error(HW_INVALID_ARGUMENT,
                                "router 'single' serves exactly one engine, the deployment has " +
                                    std::to_string(engines.size()) +
                                    " (use least_loaded or length)");
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
