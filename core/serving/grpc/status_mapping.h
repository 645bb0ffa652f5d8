// ServiceError → gRPC status: the one place that decides which code a refused request gets, and
// the metadata that goes with a refusal or an acceptance between a router and its engine processes.
//
// Threading: pure functions, callable from any thread.
#pragma once

#include <grpcpp/support/status.h>
#include <headway/serving/generation_service.h>

namespace headway::serving::grpc_frontend {

// Trailing metadata of a refused call: the request field at fault (ServiceError::param), so that a
// router passes it on to its own client.
inline constexpr const char* kErrorParamMetadata = "headway-error-param";

// Initial metadata an engine process sends on a Generate call as soon as it has accepted the
// request (before its first token): from then on the call can fail but is no longer refused, so
// a router can open its client's HTTP stream with a 200 (RequestStream::admit).
inline constexpr const char* kAcceptedMetadata = "headway-accepted";

// kInvalidArgument → INVALID_ARGUMENT, kNotFound → NOT_FOUND, kResourceExhausted →
// RESOURCE_EXHAUSTED, kUnavailable → UNAVAILABLE, kInternal → INTERNAL.
grpc::StatusCode to_grpc_code(ErrorCode code);

// The most of a refusal's message a status carries.
inline constexpr size_t kMaxStatusMessageBytes = 4096;

// The status for a refused request. Its message starts with the field at fault ("max_tokens: ...")
// when the error names one and the message does not start with it already.
// Longer than kMaxStatusMessageBytes, it is shortened.
grpc::Status to_grpc_status(const ServiceError& error);

// The other way, for a call to another process that failed: the ServiceError its status carries
// (UNAVAILABLE / DEADLINE_EXCEEDED / CANCELLED → kUnavailable, unmapped codes → kInternal).
ServiceError from_grpc_status(const grpc::Status& status, const std::string& what);

}  // namespace headway::serving::grpc_frontend
