#include "api_key_check.h"

#include <cctype>

namespace headway::serving::grpc_frontend {

bool constant_time_equal(std::string_view given, std::string_view expected) {
  // Walk all of `expected` whatever `given` holds, and fold every difference (the lengths too)
  // into one accumulator that is only tested at the end.
  size_t difference = given.size() ^ expected.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference |= static_cast<size_t>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return difference == 0;
}

grpc::Status check_authorization_value(std::string_view value, std::string_view api_key) {
  constexpr std::string_view kScheme = "bearer";
  bool scheme_matches = value.size() > kScheme.size() && value[kScheme.size()] == ' ';
  for (size_t i = 0; scheme_matches && i < kScheme.size(); ++i) {
    scheme_matches = std::tolower(static_cast<unsigned char>(value[i])) == kScheme[i];
  }
  if (!scheme_matches) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "the \"authorization\" metadata must be \"Bearer <api key>\""};
  }
  std::string_view key = value.substr(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  if (!constant_time_equal(key, api_key)) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "the API key in the \"authorization\" metadata is not valid"};
  }
  return grpc::Status::OK;
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
