// The OpenAI error shape, {"error": {"message", "type", "param", "code"}}, and the HTTP status of
// each way a request can fail. Every failure a handler meets is turned into one ApiError, so
// clients always get the same shape, whatever failed.
//
// Threading: plain values and pure functions.
#pragma once

#include <headway/serving/generation_service.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace headway::serving::http {

class ApiError : public std::runtime_error {
 public:
  // `param`: the request field at fault ("messages[1].content"), or empty.
  ApiError(int status, const std::string& message, std::string param = {})
      : std::runtime_error(message), status_(status), param_(std::move(param)) {}
  int status() const noexcept { return status_; }
  const std::string& param() const noexcept { return param_; }
  // OpenAI's code string for an error a client acts on ("previous_response_not_found"); empty:
  // the body's code is the HTTP status, as vLLM writes it.
  const std::string& code() const noexcept { return code_; }
  ApiError& with_code(std::string code) {
    code_ = std::move(code);
    return *this;
  }

 private:
  int status_;
  std::string param_;
  std::string code_;
};

// 400 naming the field; the usual failure of request parsing.
inline ApiError invalid_field(std::string param, const std::string& message) {
  return ApiError(400, message, std::move(param));
}

// 400: `what` (a field, or a value of it) "is not supported by this server".
inline ApiError not_supported(std::string param, const std::string& what) {
  return invalid_field(std::move(param), what + " is not supported by this server");
}

// The HTTP status a ServiceError code maps to (400, 404, 429, 503, 500).
int http_status_of(ErrorCode code);

ApiError api_error_of(const ServiceError& error);

// "invalid_request_error", "authentication_error", "not_found_error", "rate_limit_error",
// "service_unavailable_error" or "server_error".
const char* error_type_of(int status);

// {"error": {...}}; its code is `code`, or the HTTP status when empty, as vLLM sends it.
nlohmann::ordered_json error_json(int status, const std::string& message,
                                  const std::string& param = {}, const std::string& code = {});
inline nlohmann::ordered_json error_json(const ApiError& error) {
  return error_json(error.status(), error.what(), error.param(), error.code());
}

}  // namespace headway::serving::http
