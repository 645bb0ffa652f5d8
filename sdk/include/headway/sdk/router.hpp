// Writing a router as a C++ class. Header-only; plugin side.
// Threading: the cluster calls one instance from one thread at a time.
#pragma once

#include <headway/abi.h>

#include <headway/sdk/host.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <span>

namespace headway::sdk {

class Router {
 public:
  virtual ~Router() = default;
  // Throw Error(HW_UNAVAILABLE, …) when no engine can take the request.
  virtual hw_route_decision route(const hw_route_request& request,
                                  std::span<const hw_engine_load> engines) = 0;
};

// T is constructible from (const Host&, const Options&, std::span<const hw_engine_load>).
template <class T>
struct RouterAdapter {
  static constexpr int32_t kind = HW_KIND_ROUTER;
  static Router* self(hw_router* r) { return reinterpret_cast<Router*>(r); }

  static int32_t create(const hw_host_services* host, const hw_options* options,
                        const hw_engine_load* engines, uint32_t count, hw_router** out,
                        hw_status* status) {
    return guarded(status, [&] {
      Router* instance = new T(Host(host), Options(options), std::span(engines, count));
      *out = reinterpret_cast<hw_router*>(instance);
    });
  }
  static void destroy(hw_router* r) { delete self(r); }
  static int32_t route(hw_router* r, const hw_route_request* request, const hw_engine_load* engines,
                       uint32_t count, hw_route_decision* decision, hw_status* status) {
    return guarded(status, [&] {
      *decision = self(r)->route(*request, std::span(engines, count));
      decision->struct_size = sizeof(hw_route_decision);
    });
  }
  static constexpr hw_router_table table = {sizeof(hw_router_table), &create, &destroy, &route};
};

}  // namespace headway::sdk
