// Faulty on purpose: "sticky tenants". Routes as the least-loaded live mixed engine that holds the
// request, except that a request of the same class as the one before goes where that one went. It
// keeps the previous request's request_class pointer (abi.h lends it for the call only) and
// compares size first, then bytes: a third-party author's router did. When the suite cycled four
// classes of four lengths, the sizes never matched and the freed buffer was never read; with
// classes of one length and changing contents it reads the dead text and crashes the suite
// (suite.completed).
#include <cstring>
#include <headway/plugin.hpp>

namespace {

class PointerKeepingRouter final : public headway::sdk::Router {
 public:
  PointerKeepingRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                       std::span<const hw_engine_load>) {}

  hw_route_decision route(const hw_route_request& r,
                          std::span<const hw_engine_load> engines) override {
    const bool same_class = r.request_class.size > 0 && r.request_class.size == last_.size &&
                            std::memcmp(r.request_class.data, last_.data, last_.size) == 0;
    last_ = r.request_class;  // the fault: a pointer lent for this call only
    if (same_class) {
      for (const hw_engine_load& e : engines) {
        if (e.engine_index == last_engine_ && e.alive && e.role == HW_ENGINE_ROLE_MIXED &&
            holds(e, whole_length(r))) {
          return hw_route_decision{sizeof(hw_route_decision), last_engine_, last_engine_, 0};
        }
      }
    }
    const size_t best = headway::sdk::pick_least_loaded(
        engines, cursor_,
        [&](const hw_engine_load& e) {
          return e.alive && e.role == HW_ENGINE_ROLE_MIXED && holds(e, whole_length(r));
        },
        headway::sdk::outstanding_tokens);
    if (best == engines.size()) throw headway::sdk::Error(HW_UNAVAILABLE, "no live mixed engine");
    last_engine_ = engines[best].engine_index;
    return hw_route_decision{sizeof(hw_route_decision), last_engine_, last_engine_, 0};
  }

 private:
  hw_str last_{};
  uint32_t last_engine_ = 0;
  size_t cursor_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(PointerKeepingRouter, "org.headway.faulty.pointer_keeping_router",
                      "faulty_pointer_keeping_router", "0.0.1",
                      "Faulty on purpose: keeps the lent request_class pointer between calls",
                      headway::sdk::no_options)
