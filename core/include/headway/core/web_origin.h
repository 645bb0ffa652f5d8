// Web origins as browsers send them in the Origin header ("https://chat.example.com",
// "http://localhost:3000"): what `[server] cors_allowed_origins` lists and the HTTP frontend's CORS
// policy compares requests against (docs/serving_http.md, "Browser clients").
//
// Threading: pure functions, callable from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace headway::core {

// Empty when `origin` is "*" (every origin) or an origin as a browser writes it: a scheme, "://",
// a host (a name, an IPv4 address or an [IPv6] one) and an optional port, nothing after. Otherwise
// why it is not, in words that tell how to write it: a trailing slash, a path, a default port, a
// port's leading zero, a host that is not ASCII (browsers send punycode) or a case a browser never
// sends would never match, and "null" (sandboxed pages, file://) would let every page in.
std::string why_not_web_origin(std::string_view origin);

// Empty when browsers may send their cookies and HTTP credentials to pages of `allowed_origins`
// (Access-Control-Allow-Credentials); otherwise why not: with "*" every web page could send its
// visitors' credentials and read the answers, and with no origin no browser request is allowed.
std::string why_no_credentials_with(const std::vector<std::string>& allowed_origins);

}  // namespace headway::core
