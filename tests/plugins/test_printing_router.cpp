// A router that writes to stdout, as a plugin's debugging output might: every request to the first
// live engine that can finish it, and a line on stdout at create() and for each request. Whatever
// it prints must not reach the JSON that `headway-conformance --replay` hands back on its stdout
// (router.same_across_processes must pass it).
#include <cstdio>
#include <headway/plugin.hpp>

namespace {

class PrintingRouter final : public headway::sdk::Router {
 public:
  PrintingRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                 std::span<const hw_engine_load> engines) {
    std::printf("printing router created for %zu engines\n", engines.size());
    std::fflush(stdout);
  }

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    for (const hw_engine_load& e : engines) {
      if (!e.alive || e.role == HW_ENGINE_ROLE_PREFILL) continue;
      std::printf("request %llu to engine %u\n", static_cast<unsigned long long>(request.id),
                  e.engine_index);
      return hw_route_decision{sizeof(hw_route_decision), e.engine_index, e.engine_index, 0};
    }
    throw headway::sdk::Error(HW_UNAVAILABLE, "no live engine can finish a request");
  }
};

}  // namespace

HEADWAY_EXPORT_ROUTER(PrintingRouter, "org.headway.test.printing_router", "test_printing_router",
                      "0.0.1", "Test plugin: writes a line to stdout for every request",
                      headway::sdk::no_options)
