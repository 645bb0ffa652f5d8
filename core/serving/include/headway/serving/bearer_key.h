// The API key check both frontends share: an HTTP "Authorization" header or a gRPC "authorization"
// metadata entry of the form "Bearer <key>" (the scheme in any case, RFC 7235; one or more spaces
// before the key, RFC 6750's 1*SP), compared with the configured key through SHA-256 digests and
// CRYPTO_memcmp, so that neither the key's bytes nor its length show in the time of a refusal.
//
// Threading: pure functions.
#pragma once

#include <string_view>

namespace headway::serving {

enum class BearerCheck {
  kMatches,
  kNotBearer,  // another scheme, or no key after it
  kWrongKey,
};

BearerCheck check_bearer(std::string_view authorization, std::string_view api_key);

}  // namespace headway::serving
