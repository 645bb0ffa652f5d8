// Faulty on purpose: "sticky classes". A request with a request_class goes to engine
// hash(class) % 8 (its author's deployment had 8 engines), unchecked against the engines it is
// given; a request without one goes to the least-loaded live mixed engine, correctly. Before
// router-core-v2 the suite sent no class, so every test passed; served requests carry one (HTTP
// and gRPC `request_class`, a workload's class names). The suite must report
// router.request_classes as FAIL.
#include <headway/plugin.hpp>

namespace {

class ClassRouter final : public headway::sdk::Router {
 public:
  ClassRouter(const headway::sdk::Host&, const headway::sdk::Options&,
              std::span<const hw_engine_load>) {}

  hw_route_decision route(const hw_route_request& r,
                          std::span<const hw_engine_load> engines) override {
    if (r.request_class.size > 0) {
      uint64_t h = 1469598103934665603ull;  // FNV-1a
      for (uint64_t i = 0; i < r.request_class.size; ++i) {
        h = (h ^ static_cast<unsigned char>(r.request_class.data[i])) * 1099511628211ull;
      }
      const auto engine = static_cast<uint32_t>(h % 8);  // the fault: never checked
      return hw_route_decision{sizeof(hw_route_decision), engine, engine, 0};
    }
    const size_t best = headway::sdk::pick_least_loaded(
        engines, cursor_,
        [&](const hw_engine_load& e) {
          return e.alive && e.role == HW_ENGINE_ROLE_MIXED && holds(e, whole_length(r));
        },
        headway::sdk::outstanding_tokens);
    if (best == engines.size()) throw headway::sdk::Error(HW_UNAVAILABLE, "no live mixed engine");
    const uint32_t engine = engines[best].engine_index;
    return hw_route_decision{sizeof(hw_route_decision), engine, engine, 0};
  }

 private:
  size_t cursor_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(ClassRouter, "org.headway.faulty.class_router", "faulty_class_router",
                      "0.0.1",
                      "Faulty on purpose: sends a request with a class to an unchecked engine",
                      headway::sdk::no_options)
