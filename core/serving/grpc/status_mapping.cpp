#include "status_mapping.h"

#include <headway/serving/echoed_input.h>

#include <string>
#include <utility>

namespace headway::serving::grpc_frontend {

grpc::StatusCode to_grpc_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;  // an ErrorCode added later and not mapped yet
}

grpc::Status to_grpc_status(const ServiceError& error) {
  std::string message = error.what();
  if (!error.param().empty() && message.rfind(error.param(), 0) != 0) {
    message = error.param() + ": " + message;
  }
  // A status travels in the trailers, and a client refuses trailers past its metadata limit
  // (8 KiB by default) with RESOURCE_EXHAUSTED of its own: the refusal's code would be lost.
  return {to_grpc_code(error.code()), shortened(std::move(message), kMaxStatusMessageBytes)};
}

ServiceError from_grpc_status(const grpc::Status& status, const std::string& what) {
  ErrorCode code = ErrorCode::kInternal;
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      code = ErrorCode::kInvalidArgument;
      break;
    case grpc::StatusCode::NOT_FOUND:
      code = ErrorCode::kNotFound;
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      code = ErrorCode::kResourceExhausted;
      break;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      code = ErrorCode::kUnavailable;
      break;
    default:
      break;
  }
  return ServiceError(code, what + ": " + status.error_message() + " (gRPC status " +
                                std::to_string(static_cast<int>(status.error_code())) + ")");
}

}  // namespace headway::serving::grpc_frontend
