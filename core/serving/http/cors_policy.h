// Cross-origin resource sharing (CORS) for browser clients: which web pages' scripts may call the
// frontend and read its answers. A browser sends such a script's requests with an Origin header and
// shows it an answer only when the answer allows that origin; before a request a plain HTML form
// could not send (JSON bodies, an Authorization header, DELETE) it asks with a preflight: an
// OPTIONS request without credentials, which must be answered without the API key.
//
// CORS is not access control: any client other than a browser ignores it, and requests from origins
// not allowed are still served (the API key guards the frontend); their answers only lack the
// headers, so the browser keeps them from the page. docs/serving_http.md, "Browser clients".
//
// Threading: immutable after construction; its methods are called from any worker thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace headway::serving::http {

class CorsPolicy {
 public:
  // `allowed_origins`: "*" (every origin) or origins as browsers write them
  // (core::why_not_web_origin); empty: CORS is off and no answer carries its headers.
  // `allow_credentials`: answers also allow cookies and HTTP authentication of the browser's own
  // (Access-Control-Allow-Credentials), which browsers refuse with "*": the origin is then echoed.
  // Throws std::invalid_argument naming the origin that is not one, or for credentials with "*".
  CorsPolicy(std::vector<std::string> allowed_origins, bool allow_credentials);

  bool enabled() const { return !allowed_origins_.empty(); }

  // Whether `request` is a preflight this policy answers: OPTIONS with an Origin and an
  // Access-Control-Request-Method, while CORS is on.
  bool is_preflight(const httplib::Request& request) const;

  // Answers a preflight for a route whose methods are `route_methods` ("GET, DELETE"): 200 with
  // the methods, the headers asked for and how long the browser may cache the answer. Throws a 400
  // ApiError naming what is not allowed (the origin, or a method the route does not have).
  // add_response_headers() adds the origin afterwards, as to every answer.
  void answer_preflight(const httplib::Request& request, httplib::Response& response,
                        const std::string& route_methods) const;

  // With credentials allowed: throws a 403 ApiError for a request from an origin not listed. A page
  // can send a form-like POST (text/plain, no preflight) with the browser's cookies, and the answer
  // kept from it would not undo what the request did. Without credentials, a page has nothing to
  // authenticate with (the API key is never sent by the browser on its own). Called by every route
  // that checks the API key, before it.
  void check_origin(const httplib::Request& request) const;

  // Adds the CORS headers every answer carries while CORS is on: with "*", Access-Control-Allow-
  // Origin: *; otherwise Vary: Origin, and for a request from a listed origin that origin (and
  // Access-Control-Allow-Credentials). Called for every answer, errors included, just before its
  // headers are written.
  void add_response_headers(const httplib::Request& request, httplib::Response& response) const;

  // How long a browser may reuse a preflight's answer (Access-Control-Max-Age), Starlette's and so
  // vLLM's default.
  static constexpr int kPreflightMaxAgeSeconds = 600;

 private:
  // The Access-Control-Allow-Origin value for a request from `origin`; empty when not allowed.
  std::string allow_origin_value(std::string_view origin) const;

  std::vector<std::string> allowed_origins_;
  bool allow_all_ = false;
  bool allow_credentials_ = false;
};

}  // namespace headway::serving::http
