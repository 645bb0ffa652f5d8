#include <headway/serving/bearer_key.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cctype>
#include <cstddef>

namespace headway::serving {

namespace {

// Compares SHA-256 digests with CRYPTO_memcmp: digests of equal length keep the key's length out of
// the timing as well as its bytes.
bool same_key(std::string_view offered, std::string_view api_key) {
  unsigned char offered_digest[SHA256_DIGEST_LENGTH];
  unsigned char key_digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(offered.data()), offered.size(), offered_digest);
  SHA256(reinterpret_cast<const unsigned char*>(api_key.data()), api_key.size(), key_digest);
  return CRYPTO_memcmp(offered_digest, key_digest, SHA256_DIGEST_LENGTH) == 0;
}

}  // namespace

BearerCheck check_bearer(std::string_view authorization, std::string_view api_key) {
  constexpr std::string_view kScheme = "bearer";
  bool scheme_matches =
      authorization.size() > kScheme.size() && authorization[kScheme.size()] == ' ';
  for (size_t i = 0; scheme_matches && i < kScheme.size(); ++i) {
    scheme_matches = std::tolower(static_cast<unsigned char>(authorization[i])) == kScheme[i];
  }
  if (!scheme_matches) return BearerCheck::kNotBearer;
  std::string_view key = authorization.substr(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  if (key.empty()) return BearerCheck::kNotBearer;
  return same_key(key, api_key) ? BearerCheck::kMatches : BearerCheck::kWrongKey;
}

}  // namespace headway::serving
