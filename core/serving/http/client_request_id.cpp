#include "client_request_id.h"

#include <headway/serving/random_bits.h>
#include <httplib.h>

#include "api_error.h"

namespace headway::serving::http {

void check_client_request_id(std::string_view id, const std::string& where) {
  if (id.empty()) throw invalid_field(where, where + " must not be empty");
  if (id.size() > kMaxClientRequestIdLength) {
    throw invalid_field(where, where + " is " + std::to_string(id.size()) +
                                   " characters long; at most " +
                                   std::to_string(kMaxClientRequestIdLength) + " are taken");
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c < 0x20 || c > 0x7e) {
      throw invalid_field(where, where + " holds a byte that is not printable ASCII at position " +
                                     std::to_string(i) +
                                     " (ids go into logs and headers as they are)");
    }
  }
}

void echo_request_id(const httplib::Request& request, httplib::Response& response) {
  if (!request.has_header("X-Request-Id")) return;
  const std::string id = request.get_header_value("X-Request-Id");
  try {
    check_client_request_id(id, "X-Request-Id");
  } catch (const ApiError&) {
    return;  // refused by header_request_id, and not sent back
  }
  response.set_header("X-Request-Id", id);
}

std::string service_request_id(const std::string& answer_id) {
  return random_request_id(answer_id + "#");
}

std::optional<std::string> header_request_id(const httplib::Request& request) {
  if (!request.has_header("X-Request-Id")) return std::nullopt;
  std::string id = request.get_header_value("X-Request-Id");
  check_client_request_id(id, "X-Request-Id");
  return id;
}

}  // namespace headway::serving::http
