// What a service makes of its router's answers at admission, and what it tells the operator.
//
// - A core::Error from routing (RouterInstance::route): a refusal when the router answered
//   HW_UNAVAILABLE (no engine can take the request: 503, counted as "unavailable"), the router's
//   failure for anything else (an exception, another status code, a decision out of range: 500,
//   counted as "internal"). A failure is the plugin's fault, not the client's, and is logged.
// - A core::Error from handing the engines' KV events to the router outside routing (an engine
//   process's feed read by a router process): logged, and nothing else fails (the router is told
//   to forget the engine's pieces with its next events: RouterInstance::kv_events).
// - A route() call that took kSlowRoute or more: logged as a warning. The service routes under its
//   lock, so every request admitted meanwhile waited for it (abi.h: route() must not block).
//
// Each kind is logged the first time, then at most once every kLogEvery with the number since
// (core::LogThrottle), so that a router failing or blocking on every request does not flood the
// log.
//
// Ownership: a value. Threading: one thread at a time (the service calls it under its mutex).
#pragma once

#include <headway/core/error.h>
#include <headway/core/log_throttle.h>
#include <headway/serving/metrics_serving.h>
#include <headway/serving/service_error.h>

#include <chrono>
#include <cstdint>
#include <string_view>
#include <utility>

namespace headway::serving {

class RouterWatch {
 public:
  static constexpr std::chrono::seconds kLogEvery{10};
  static constexpr std::chrono::milliseconds kSlowRoute{100};

  // The rejection reason and the client's error for `e`, raised while routing request `id` to
  // `targets` ("engine", "engine process").
  std::pair<Rejection, ServiceError> failed(const core::Error& e, std::string_view id,
                                            std::string_view targets);
  // The router failed on KV events handed to it outside routing.
  void events_failed(const core::Error& e);
  // Routing request `id` took `took` in router `router` (whether it placed the request or not).
  void routed(std::chrono::steady_clock::duration took, std::string_view id,
              std::string_view router);

 private:
  core::LogThrottle failures_{kLogEvery};
  core::LogThrottle slow_{kLogEvery};
  core::LogThrottle event_failures_{kLogEvery};
};

}  // namespace headway::serving
