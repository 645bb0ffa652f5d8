// Faulty on purpose: sends each request to the live engine with the fewest waiting requests that
// can finish it (mixed or decode), breaking ties by a salt drawn once per process (a static seeded
// from std::random_device when the library loads: "spread equal engines at random"). Two instances
// in one process place every request alike, so router.deterministic passes; another process places
// ties elsewhere, and two runs of one `headway simulate` report different latencies. The suite
// must report router.same_across_processes as FAIL (core from router-core-v3).
#include <cstdint>
#include <headway/plugin.hpp>
#include <headway/sdk/sampling.hpp>
#include <random>

namespace {

// The fault: 64 bits drawn per process, mixed into every tie (so that two processes agree on how
// to break a tie only by a chance of one in many).
const uint64_t kSaltOfThisProcess =
    (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();

class ProcessSeededRouter final : public headway::sdk::Router {
 public:
  ProcessSeededRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                      std::span<const hw_engine_load>) {}

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    const hw_engine_load* best = nullptr;
    uint64_t best_rank = 0;
    for (const hw_engine_load& e : engines) {
      if (!e.alive || e.role == HW_ENGINE_ROLE_PREFILL) continue;
      if (!holds(e, whole_length(request))) continue;
      // The queue first; among equals, an order that the salt shuffles per process.
      const uint64_t tie = headway::sdk::sampling::mix64(kSaltOfThisProcess ^
                                                         headway::sdk::sampling::mix64(request.id) ^
                                                         e.engine_index) >>
                           32;
      const uint64_t rank = (uint64_t{e.waiting} << 32) | tie;
      if (best == nullptr || rank < best_rank) {
        best = &e;
        best_rank = rank;
      }
    }
    if (best == nullptr) {
      throw headway::sdk::Error(HW_UNAVAILABLE, "no live engine can finish a request");
    }
    return hw_route_decision{sizeof(hw_route_decision), best->engine_index, best->engine_index, 0};
  }
};

}  // namespace

HEADWAY_EXPORT_ROUTER(ProcessSeededRouter, "org.headway.faulty.process_seeded_router",
                      "faulty_process_seeded_router", "0.0.1",
                      "Faulty on purpose: breaks ties between engines by a salt drawn per process",
                      headway::sdk::no_options)
