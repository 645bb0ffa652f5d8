// Faulty on purpose: every decision names decode engine 999, past any deployment's engines. The
// host refuses each one, so no request is ever placed and router.create must fail, with each
// shape's line giving the first refusal (which names the engine) rather than only "no request was
// placed".
#include <headway/plugin.hpp>

namespace {

class UnplaceableRouter final : public headway::sdk::Router {
 public:
  UnplaceableRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                    std::span<const hw_engine_load>) {}

  hw_route_decision route(const hw_route_request&,
                          std::span<const hw_engine_load> engines) override {
    const uint32_t first = engines.empty() ? 0 : engines.front().engine_index;
    return hw_route_decision{sizeof(hw_route_decision), first, 999, 0};
  }
};

}  // namespace

HEADWAY_EXPORT_ROUTER(UnplaceableRouter, "org.headway.faulty.unplaceable_router",
                      "faulty_unplaceable_router", "0.0.1",
                      "Faulty on purpose: sends every request's decode to engine 999",
                      headway::sdk::no_options)
