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
  // OpenAI's code string where clients branch on it ("context_length_exceeded"); empty for the
  // others, whose HTTP body carries the status number as vLLM's does. Not carried over gRPC.
  const std::string& openai_code() const noexcept { return openai_code_; }
  ServiceError& with_openai_code(std::string code) {
    openai_code_ = std::move(code);
    return *this;
  }

 private:
  ErrorCode code_;
  std::string param_;
  std::string openai_code_;
};

}  // namespace headway::serving
