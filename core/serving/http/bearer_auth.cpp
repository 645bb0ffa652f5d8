#include "bearer_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cctype>

namespace headway::serving::http {
namespace {

constexpr std::string_view kScheme = "bearer ";

}  // namespace

bool bearer_matches(std::string_view authorization, std::string_view api_key) {
  if (authorization.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  }
  const std::string_view offered = authorization.substr(kScheme.size());
  // Comparing digests of equal length keeps the key's length out of the timing as well.
  unsigned char offered_digest[SHA256_DIGEST_LENGTH];
  unsigned char key_digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(offered.data()), offered.size(), offered_digest);
  SHA256(reinterpret_cast<const unsigned char*>(api_key.data()), api_key.size(), key_digest);
  return CRYPTO_memcmp(offered_digest, key_digest, SHA256_DIGEST_LENGTH) == 0;
}

}  // namespace headway::serving::http
