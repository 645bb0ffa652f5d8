// The optional API key of the gRPC frontend: "authorization: Bearer <key>" call metadata.
//
// Threading: pure functions, callable from any thread.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

namespace headway::serving::grpc_frontend {

// Checks the value of one "authorization" metadata entry against `api_key` (check_bearer(), the
// HTTP frontend's rule too): OK for "Bearer <api_key>", else UNAUTHENTICATED saying why.
grpc::Status check_authorization_value(std::string_view value, std::string_view api_key);

// OK when `api_key` is empty (no authentication) or the call carries the right key; else
// UNAUTHENTICATED with a message that says what is missing or wrong (never the key).
grpc::Status check_api_key(const grpc::ServerContext& context, std::string_view api_key);

}  // namespace headway::serving::grpc_frontend
