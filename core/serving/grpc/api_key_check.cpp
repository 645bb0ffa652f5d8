#include "api_key_check.h"

#include <headway/serving/bearer_key.h>

namespace headway::serving::grpc_frontend {

grpc::Status check_authorization_value(std::string_view value, std::string_view api_key) {
  switch (check_bearer(value, api_key)) {
    case BearerCheck::kMatches:
      return grpc::Status::OK;
    case BearerCheck::kNotBearer:
      return {grpc::StatusCode::UNAUTHENTICATED,
              "the \"authorization\" metadata must be \"Bearer <api key>\""};
    case BearerCheck::kWrongKey:
      break;
  }
  return {grpc::StatusCode::UNAUTHENTICATED,
          "the API key in the \"authorization\" metadata is not valid"};
}

grpc::Status check_api_key(const grpc::ServerContext& context, std::string_view api_key) {
  if (api_key.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto entry = metadata.find("authorization");
  if (entry == metadata.end()) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "this server requires an API key: send the metadata \"authorization: Bearer <api "
            "key>\""};
  }
  return check_authorization_value(std::string_view(entry->second.data(), entry->second.size()),
                                   api_key);
}

}  // namespace headway::serving::grpc_frontend
