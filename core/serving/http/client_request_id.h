// The request ids clients choose: the X-Request-Id header on every generation route, else vLLM's
// request_id body field. A completion's or chat answer's id is then the route's prefix and the
// client's id ("chatcmpl-" + id), as vLLM makes it; a Responses API response's is its body
// request_id as it is (vLLM's), or the header's id after "resp_" (Headway's). A proxy's trace id
// so reaches the answer and, with a random part after it, the ids the service and the engine
// processes log. docs/serving_http.md, "Request ids".
//
// Threading: pure functions.
#pragma once

#include <headway/serving/generation_service.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace headway::serving::http {

// Longest client id taken: the service's limit less the longest prefix and the "-<index>" of a
// choice of n, so that every id built from it stays within that limit.
inline constexpr size_t kMaxClientRequestIdLength = 200;
// "chatcmpl-" + the id + service_request_id's '#' and 32 hex digits + a choice's "-127".
static_assert(9 + kMaxClientRequestIdLength + 33 + 4 <= kMaxRequestIdLength);

// Empty when `id` is 1 to kMaxClientRequestIdLength characters of printable ASCII (space
// included); otherwise why not, naming `where` ("X-Request-Id", "request_id").
std::string why_not_client_request_id(std::string_view id, const std::string& where);
// Throws a 400 ApiError naming `where` with why_not_client_request_id's reason, when it has one.
void check_client_request_id(std::string_view id, const std::string& where);

// The X-Request-Id header's value, checked; nullopt when the request has none.
std::optional<std::string> header_request_id(const httplib::Request& request);

// Sets the X-Request-Id header of `response` to the request's, when it has one that passes the
// check (a bad one is refused later, by header_request_id): the header comes back on every
// answer, errors included, as vLLM's middleware sends it.
void echo_request_id(const httplib::Request& request, httplib::Response& response);

// Sets the X-Request-Id header of `response` to the answer's `id` when the request brought no
// header of its own: OpenAI's API always sends one, and the OpenAI SDKs show it as `_request_id`
// (in their errors and logs too). The answer's id is what the service's logs carry at the start
// of the request's id.
void name_answer_in_header(const httplib::Request& request, httplib::Response& response,
                           const std::string& id);

// The id the service runs a request under when its client chose the answer's id: that id, '#'
// and 32 random hex digits. So a retry under the same id while the first attempt still runs is
// taken (as vLLM now does: the client's id is the answer's, not the engine's), and no other client
// can name the request to abort it. At most 9 + 200 + 33 + "-<index>" characters.
std::string service_request_id(const std::string& answer_id);

}  // namespace headway::serving::http
