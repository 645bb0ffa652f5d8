#include "api_error.h"

namespace headway::serving::http {

int http_status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

ApiError api_error_of(const ServiceError& error) {
  ApiError api(http_status_of(error.code()), error.what(), error.param());
  if (!error.openai_code().empty()) api.with_code(error.openai_code());
  return api;
}

const char* error_type_of(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json error_json(int status, const std::string& message, const std::string& param,
                                  const std::string& code) {
  return {
      {"error",
       {{"message", message},
        {"type", error_type_of(status)},
        {"param", param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param)},
        {"code", code.empty() ? nlohmann::ordered_json(status) : nlohmann::ordered_json(code)}}}};
}

}  // namespace headway::serving::http
