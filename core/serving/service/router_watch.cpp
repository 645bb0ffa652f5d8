#include "router_watch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <string>

namespace headway::serving {

namespace {

std::string more_since(uint64_t since, const char* what) {
  return since == 0 ? std::string() : fmt::format(" ({} more {} since the last line)", since, what);
}

}  // namespace

std::pair<Rejection, ServiceError> RouterWatch::failed(const core::Error& e, std::string_view id,
                                                       std::string_view targets) {
  if (e.code() == HW_UNAVAILABLE) {
    return {Rejection::kUnavailable,
            ServiceError(ErrorCode::kUnavailable,
                         fmt::format("no {} can take request \"{}\": {}", targets, id, e.what()))};
  }
  uint64_t since = 0;
  if (failures_.due(since)) {
    spdlog::error("request \"{}\" failed in the router: {}{}", id, e.what(),
                  more_since(since, "router failures"));
  }
  return {Rejection::kInternal,
          ServiceError(ErrorCode::kInternal,
                       fmt::format("request \"{}\" failed in the router: {}", id, e.what()))};
}

void RouterWatch::events_failed(const core::Error& e) {
  uint64_t since = 0;
  if (!event_failures_.due(since)) return;
  spdlog::error("the router failed on its engines' KV events: {}{}", e.what(),
                more_since(since, "such failures"));
}

void RouterWatch::routed(std::chrono::steady_clock::duration took, std::string_view id,
                         std::string_view router) {
  uint64_t since = 0;
  if (took < kSlowRoute || !slow_.due(since)) return;
  spdlog::warn(
      "router '{}' took {:.3f} s to route request \"{}\"; requests arriving meanwhile waited for "
      "it (route() must not block: abi.h){}",
      router, std::chrono::duration<double>(took).count(), id,
      more_since(since, "slow route() calls"));
}

}  // namespace headway::serving
