// Faulty on purpose: sends each request to the first live engine that can finish it (mixed or
// decode), and remembers every request it has routed, by id, to count requests per engine. A
// router is never told that a request finished, so the map only grows: memory per request served,
// for the server's lifetime. The suite must report router.per_request_heap as FAIL (30 bytes or so
// per request pass router.steady_state_heap's per-call bound).
#include <cstdint>
#include <headway/plugin.hpp>
#include <unordered_map>

namespace {

class RememberingRouter final : public headway::sdk::Router {
 public:
  RememberingRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                    std::span<const hw_engine_load>) {}

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    for (const hw_engine_load& e : engines) {
      if (!e.alive || e.role == HW_ENGINE_ROLE_PREFILL) continue;
      engine_of_[request.id] = e.engine_index;  // the fault: never erased
      return hw_route_decision{sizeof(hw_route_decision), e.engine_index, e.engine_index, 0};
    }
    throw headway::sdk::Error(HW_UNAVAILABLE, "no live engine can finish a request");
  }

 private:
  std::unordered_map<uint64_t, uint32_t> engine_of_;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(RememberingRouter, "org.headway.faulty.remembering_router",
                      "faulty_remembering_router", "0.0.1",
                      "Faulty on purpose: keeps an entry for every request it routed",
                      headway::sdk::no_options)
