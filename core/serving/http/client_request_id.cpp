#include "client_request_id.h"

#include <headway/serving/random_bits.h>
#include <httplib.h>

#include "api_error.h"

namespace headway::serving::http {

std::string why_not_client_request_id(std::string_view id, const std::string& where) {
  if (id.empty()) return where + " must not be empty";
  if (id.size() > kMaxClientRequestIdLength) {
    return where + " is " + std::to_string(id.size()) + " characters long; at most " +
           std::to_string(kMaxClientRequestIdLength) + " are taken";
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c < 0x20 || c > 0x7e) {
      return where + " holds a byte that is not printable ASCII at position " + std::to_string(i) +
             " (ids go into logs and headers as they are)";
    }
  }
  return "";
}

void check_client_request_id(std::string_view id, const std::string& where) {
  const std::string why = why_not_client_request_id(id, where);
  if (!why.empty()) throw invalid_field(where, why);
}

void echo_request_id(const httplib::Request& request, httplib::Response& response) {
  if (!request.has_header("X-Request-Id")) return;
  const std::string id = request.get_header_value("X-Request-Id");
  // A bad one is refused by header_request_id, and not sent back.
  if (why_not_client_request_id(id, "X-Request-Id").empty()) {
    response.set_header("X-Request-Id", id);
  }
}

void name_answer_in_header(const httplib::Request& request, httplib::Response& response,
                           const std::string& id) {
  if (!request.has_header("X-Request-Id")) response.set_header("X-Request-Id", id);
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
