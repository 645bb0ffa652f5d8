// Writing a router as a C++ class. Header-only; plugin side.
// Lifetimes: the Host may be kept, by reference or by copy (it lives as long as the instance); the
// Options are valid only during the constructor: read every option there.
// Threading: the cluster calls one instance from one thread at a time, not always the same thread,
// so keep no thread_local state. Instances of one library may run concurrently (one per cluster):
// guard any static state.
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
  static Router* self(hw_router* r) { return &reinterpret_cast<WithHost<T>*>(r)->object; }

  static int32_t create(const hw_host_services* host, const hw_options* options,
                        const hw_engine_load* engines, uint32_t count, hw_router** out,
                        hw_status* status) {
    return guarded(status, [&] {
      *out = reinterpret_cast<hw_router*>(
          new WithHost<T>(host, Options(options), std::span(engines, count)));
    });
  }
  static void destroy(hw_router* r) { delete reinterpret_cast<WithHost<T>*>(r); }
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
