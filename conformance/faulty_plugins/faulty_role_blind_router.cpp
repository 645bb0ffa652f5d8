// Faulty on purpose: blind to the engines' roles. A request of even id goes whole to the live
// engine with the fewest outstanding tokens (on the disaggregated shape, often a prefill engine,
// which would decode it); one of odd id is prefilled there and decoded on the next live engine (a
// split between mixed engines, or from a decode engine). router.honours_roles must fail it: the
// host refuses each such placement, and the suite judges it as the placement it was.
#include <headway/plugin.hpp>

namespace {

class RoleBlindRouter final : public headway::sdk::Router {
 public:
  RoleBlindRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                  std::span<const hw_engine_load>) {}

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    const size_t best = headway::sdk::pick_least_loaded(
        engines, cursor_, [](const hw_engine_load& e) { return e.alive != 0; },
        headway::sdk::outstanding_tokens);
    if (best == engines.size()) throw headway::sdk::Error(HW_UNAVAILABLE, "every engine is down");
    size_t decode = best;
    for (size_t k = 1; k < engines.size() && request.id % 2 == 1 && decode == best; ++k) {
      const size_t next = (best + k) % engines.size();
      if (engines[next].alive != 0) decode = next;
    }
    return hw_route_decision{sizeof(hw_route_decision), engines[best].engine_index,
                             engines[decode].engine_index, 0};
  }

 private:
  size_t cursor_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(RoleBlindRouter, "org.headway.faulty.role_blind_router",
                      "faulty_role_blind_router", "0.0.1",
                      "Faulty on purpose: places requests whatever the engines' roles",
                      headway::sdk::no_options)
