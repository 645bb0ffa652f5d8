// A router template: each request goes to the live mixed-role engine with the least outstanding
// work (ties round-robin) among those whose max_model_len holds it, preferring those whose waiting
// queue has room (the host refuses a request placed on a full one with a 429). Copy this folder,
// rename the class and the plugin names, change route().
// Check it with: headway-conformance --plugin build/my_router.so
#include <headway/plugin.hpp>

namespace {

class MyRouter final : public headway::sdk::Router {
 public:
  MyRouter(const headway::sdk::Host&, const headway::sdk::Options&,
           std::span<const hw_engine_load> engines) {
    // Refuse deployments this router cannot serve at create(), not at the first request.
    bool any_mixed = false;
    for (const hw_engine_load& e : engines) any_mixed |= e.role == HW_ENGINE_ROLE_MIXED;
    if (!any_mixed) throw headway::sdk::Error(HW_INVALID_ARGUMENT, "my_router needs mixed engines");
  }

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    // holds(): the engines' max_model_len (ABI 1.7). The host admits requests up to the largest
    // of them and fails one placed where it does not fit, as this router's error.
    const auto live = [&](const hw_engine_load& e) {
      return e.alive && e.role == HW_ENGINE_ROLE_MIXED && holds(e, whole_length(request));
    };
    // has_room(): the engines' max_waiting, which the host tells every Router (ABI 1.6).
    size_t best = headway::sdk::pick_least_loaded(
        engines, cursor_, [&](const hw_engine_load& e) { return live(e) && has_room(e); },
        headway::sdk::outstanding_tokens);
    if (best == engines.size()) {
      best =
          headway::sdk::pick_least_loaded(engines, cursor_, live, headway::sdk::outstanding_tokens);
    }
    // HW_UNAVAILABLE is the one answer when no live engine can take the request.
    if (best == engines.size()) {
      throw headway::sdk::Error(HW_UNAVAILABLE, "no live engine holds the request");
    }
    const uint32_t engine = engines[best].engine_index;
    return hw_route_decision{sizeof(hw_route_decision), engine, engine, 0};
  }

 private:
  size_t cursor_ = 0;  // round-robin among ties
};

}  // namespace

HEADWAY_EXPORT_ROUTER(MyRouter, "com.example.router.mine", "my_router", "0.1.0",
                      "Template router: least outstanding tokens", headway::sdk::no_options)
