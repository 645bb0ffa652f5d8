// Router that sends each request to the live engine with the fewest outstanding tokens (prompt
// tokens still to prefill plus output tokens still to generate); ties go round-robin so that an
// idle cluster spreads its first requests instead of piling them on engine 0.
#include <cstdint>
#include <headway/plugin.hpp>

namespace {

class LeastLoadedRouter final : public headway::sdk::Router {
 public:
  LeastLoadedRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                    std::span<const hw_engine_load> engines) {
    if (engines.empty()) throw headway::sdk::Error(HW_INVALID_ARGUMENT, "no engines to route to");
  }

  hw_route_decision route(const hw_route_request&,
                          std::span<const hw_engine_load> engines) override {
    const size_t n = engines.size();
    size_t best = n;
    for (size_t k = 0; k < n; ++k) {
      size_t i = (next_ + k) % n;  // scanning from the rotating start breaks ties round-robin
      if (!engines[i].alive || engines[i].role == HW_ENGINE_ROLE_PREFILL ||
          engines[i].role == HW_ENGINE_ROLE_DECODE) {
        continue;
      }
      if (best == n || engines[i].outstanding_tokens < engines[best].outstanding_tokens) best = i;
    }
    if (best == n) throw headway::sdk::Error(HW_UNAVAILABLE, "no live mixed-role engine");
    next_ = (best + 1) % n;
    uint32_t engine = engines[best].engine_index;
    return hw_route_decision{sizeof(hw_route_decision), engine, engine, 0};
  }

 private:
  size_t next_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(LeastLoadedRouter, "org.headway.router.least_loaded", "least_loaded", "0.1.0",
                      "Fewest outstanding tokens; ties round-robin", headway::sdk::no_options)
