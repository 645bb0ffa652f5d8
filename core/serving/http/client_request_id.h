// The request ids clients choose, as vLLM takes them: the X-Request-Id header on every generation
// route, else vLLM's request_id body field. A completion's or chat answer's id is then the route's
// prefix and the client's id ("chatcmpl-" + id), a Responses API response's the header's id after
// "resp_", or its body request_id as it is (vLLM's default already holds the prefix). A proxy's
// trace id so reaches the answer, the service's errors and logs, and the engine processes' ids.
// docs/serving_http.md, "Request ids".
//
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace httplib {
struct Request;
}  // namespace httplib

namespace headway::serving::http {

// Longest client id taken: the service's limit (256) less the longest prefix and the "-<index>"
// of a choice of n, so that every id built from it stays within that limit.
inline constexpr size_t kMaxClientRequestIdLength = 200;

// Throws a 400 ApiError naming `where` ("X-Request-Id", "request_id") unless `id` is 1 to
// kMaxClientRequestIdLength characters of printable ASCII (space included).
void check_client_request_id(std::string_view id, const std::string& where);

// The X-Request-Id header's value, checked; nullopt when the request has none.
std::optional<std::string> header_request_id(const httplib::Request& request);

}  // namespace headway::serving::http
