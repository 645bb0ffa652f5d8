// Why a generation service refused a request, as frontends report it: thrown by
// GenerationService::submit(), and carried by a RequestStream whose request was refused by the
// service that was to run it after submit() returned (an engine process behind a router).
//
// Ownership/threading: plain values.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace headway::serving {

// Why a request was refused; frontends map it to HTTP status / gRPC code.
enum class ErrorCode {
  kInvalidArgument,    // HTTP 400, gRPC INVALID_ARGUMENT
  kNotFound,           // HTTP 404, gRPC NOT_FOUND (e.g. unknown model)
  kResourceExhausted,  // HTTP 429, gRPC RESOURCE_EXHAUSTED (queue full)
  kUnavailable,        // HTTP 503, gRPC UNAVAILABLE (draining, no engine alive)
  kInternal,           // HTTP 500, gRPC INTERNAL
};

class ServiceError : public std::runtime_error {
 public:
  // `param`: the request field at fault ("max_tokens", "messages[1].content"), or empty.
  ServiceError(ErrorCode code, const std::string& message, std::string param = {})
      : std::runtime_error(message), code_(code), param_(std::move(param)) {}
  ErrorCode code() const noexcept { return code_; }
  const std::string& param() const noexcept { return param_; }

 private:
  ErrorCode code_;
  std::string param_;
};

}  // namespace headway::serving
