#include "cors_policy.h"

#include <headway/core/web_origin.h>
#include <httplib.h>

#include <algorithm>
#include <stdexcept>

#include "api_error.h"

namespace headway::serving::http {
namespace {

constexpr const char* kOriginsKey = "[server] cors_allowed_origins";

// Whether `method` is one of `methods` ("GET, DELETE"); methods are case-sensitive (RFC 9110).
bool lists_method(const std::string& methods, const std::string& method) {
  size_t begin = 0;
  while (begin <= methods.size()) {
    size_t end = methods.find(", ", begin);
    if (end == std::string::npos) end = methods.size();
    if (methods.compare(begin, end - begin, method) == 0) return true;
    begin = end + 2;
  }
  return false;
}

}  // namespace

CorsPolicy::CorsPolicy(std::vector<std::string> allowed_origins, bool allow_credentials)
    : allowed_origins_(std::move(allowed_origins)), allow_credentials_(allow_credentials) {
  for (const std::string& origin : allowed_origins_) {
    const std::string why = core::why_not_web_origin(origin);
    if (!why.empty()) throw std::invalid_argument(std::string(kOriginsKey) + ": " + why);
    allow_all_ = allow_all_ || origin == "*";
  }
  if (allow_credentials_) {
    const std::string why = core::why_no_credentials_with(allowed_origins_);
    if (!why.empty()) throw std::invalid_argument("[server] cors_allow_credentials: " + why);
  }
}

std::string CorsPolicy::allow_origin_value(std::string_view origin) const {
  if (origin.empty()) return "";
  // With credentials, "*" is refused at construction, so an allowed origin is always echoed.
  if (allow_all_) return "*";
  const bool listed =
      std::find(allowed_origins_.begin(), allowed_origins_.end(), origin) != allowed_origins_.end();
  return listed ? std::string(origin) : std::string();
}

bool CorsPolicy::is_preflight(const httplib::Request& request) const {
  return enabled() && request.method == "OPTIONS" && request.has_header("Origin") &&
         request.has_header("Access-Control-Request-Method");
}

void CorsPolicy::answer_preflight(const httplib::Request& request, httplib::Response& response,
                                  const std::string& route_methods) const {
  const std::string origin = request.get_header_value("Origin");
  if (allow_origin_value(origin).empty()) {
    throw ApiError(400,
                   "CORS preflight refused: origin \"" + origin + "\" is not in " + kOriginsKey);
  }
  const std::string method = request.get_header_value("Access-Control-Request-Method");
  if (!lists_method(route_methods, method)) {
    throw ApiError(400, "CORS preflight refused: " + request.path + " does not take method \"" +
                            method + "\"; it takes " + route_methods);
  }
  // 200, as Starlette answers: cpp-httplib writes Content-Length: 0 on an empty body, which a 204
  // must not carry.
  response.status = 200;
  response.set_header("Access-Control-Allow-Methods", route_methods);
  // Every request header is allowed, as vLLM's default "*" does: the OpenAI SDKs send headers of
  // their own (x-stainless-*), and the literal "*" would not cover Authorization.
  const std::string asked_headers = request.get_header_value("Access-Control-Request-Headers");
  if (!asked_headers.empty()) response.set_header("Access-Control-Allow-Headers", asked_headers);
  response.set_header("Access-Control-Max-Age", std::to_string(kPreflightMaxAgeSeconds));
}

void CorsPolicy::check_origin(const httplib::Request& request) const {
  if (!allow_credentials_ || !request.has_header("Origin")) return;
  const std::string origin = request.get_header_value("Origin");
  if (allow_origin_value(origin).empty()) {
    throw ApiError(403, "origin \"" + origin + "\" is not in " + kOriginsKey +
                            ": with cors_allow_credentials, requests from other pages are refused, "
                            "since they would carry the browser's credentials");
  }
}

void CorsPolicy::add_response_headers(const httplib::Request& request,
                                      httplib::Response& response) const {
  if (!enabled()) return;
  // Every answer says how it depends on Origin, also one to a request without it, which a cache
  // could otherwise hand to a page: the same "*" for all, or Vary. With it goes the one header of
  // Headway's own a page's script may want to read, X-Request-Id (docs/serving_http.md, "Request
  // ids"): scripts read only the CORS-safelisted ones unless told.
  if (allow_all_) {
    response.set_header("Access-Control-Allow-Origin", "*");
    response.set_header("Access-Control-Expose-Headers", "X-Request-Id");
    return;
  }
  response.set_header("Vary", "Origin");
  const std::string allowed = allow_origin_value(request.get_header_value("Origin"));
  if (allowed.empty()) return;
  response.set_header("Access-Control-Allow-Origin", allowed);
  response.set_header("Access-Control-Expose-Headers", "X-Request-Id");
  if (allow_credentials_) response.set_header("Access-Control-Allow-Credentials", "true");
}

}  // namespace headway::serving::http
