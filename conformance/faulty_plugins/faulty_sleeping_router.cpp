// Faulty on purpose: sends each request to the first live engine that can finish it (mixed or
// decode), except that every 25th route() call sleeps for 2 ms first, as a router would that asks
// a remote service for placements. The server routes under its lock, so every request arriving
// meanwhile waits too. The suite must report router.never_waits as FAIL.
#include <chrono>
#include <cstdint>
#include <headway/plugin.hpp>
#include <thread>

namespace {

class SleepingRouter final : public headway::sdk::Router {
 public:
  SleepingRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                 std::span<const hw_engine_load>) {}

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    if (++calls_ % 25 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (const hw_engine_load& e : engines) {
      if (!e.alive || e.role == HW_ENGINE_ROLE_PREFILL) continue;
      if (!holds(e, whole_length(request))) continue;
      return hw_route_decision{sizeof(hw_route_decision), e.engine_index, e.engine_index, 0};
    }
    throw headway::sdk::Error(HW_UNAVAILABLE, "no live engine can finish a request");
  }

 private:
  uint64_t calls_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(SleepingRouter, "org.headway.faulty.sleeping_router",
                      "faulty_sleeping_router", "0.0.1",
                      "Faulty on purpose: every 25th route() call sleeps for 2 ms",
                      headway::sdk::no_options)
