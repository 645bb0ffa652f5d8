// The API key check both frontends share.
#include <gtest/gtest.h>
#include <headway/serving/bearer_key.h>

namespace {

using headway::serving::BearerCheck;
using headway::serving::check_bearer;

// One rule for HTTP and gRPC: the HTTP frontend refused "Bearer  key" (two spaces), which gRPC
// accepted.
TEST(BearerKey, TheSchemeInAnyCaseThenOneOrMoreSpacesThenTheKey) {
  for (const char* value : {"Bearer k3y", "bearer k3y", "BEARER k3y", "Bearer   k3y"}) {
    EXPECT_EQ(check_bearer(value, "k3y"), BearerCheck::kMatches) << value;
  }
}

TEST(BearerKey, OtherSchemesAndMissingKeysAreNotBearer) {
  for (const char* value :
       {"Basic k3y", "k3y", "Bearer", "Bearer ", "Bearer   ", "Bearerk3y", ""}) {
    EXPECT_EQ(check_bearer(value, "k3y"), BearerCheck::kNotBearer) << value;
  }
}

TEST(BearerKey, EveryByteAndTheLengthOfTheKeyCount) {
  for (const char* value :
       {"Bearer k3", "Bearer k3yy", "Bearer K3Y", "Bearer k3y ", "Bearer x3y"}) {
    EXPECT_EQ(check_bearer(value, "k3y"), BearerCheck::kWrongKey) << value;
  }
  EXPECT_EQ(check_bearer(std::string_view("Bearer k3y\0", 11), "k3y"), BearerCheck::kWrongKey);
}

}  // namespace
