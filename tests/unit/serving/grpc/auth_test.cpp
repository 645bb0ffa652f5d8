// The optional API key: "authorization: Bearer <key>" or UNAUTHENTICATED, on every Headway method;
// the standard health service stays open for probes.
#include <grpc/health/v1/health.grpc.pb.h>
#include <gtest/gtest.h>

#include "api_key_check.h"
#include "frontend_fixture.h"

namespace headway::serving::testing {
namespace {

using grpc_frontend::check_authorization_value;

constexpr const char* kKey = "s3cret-key";

TEST(AuthorizationValue, AcceptsTheBearerSchemeInAnyCase) {
  EXPECT_TRUE(check_authorization_value("Bearer s3cret-key", kKey).ok());
  EXPECT_TRUE(check_authorization_value("bearer s3cret-key", kKey).ok());
  EXPECT_TRUE(check_authorization_value("BEARER   s3cret-key", kKey).ok());
}

TEST(AuthorizationValue, RefusesOtherSchemesAndWrongKeysWithoutEchoingTheKey) {
  for (const char* value :
       {"Basic s3cret-key", "s3cret-key", "Bearer", "Bearer ", "Bearers3cret-key",
        "Bearer s3cret-ke", "Bearer s3cret-key2", "Bearer S3CRET-KEY"}) {
    const grpc::Status status = check_authorization_value(value, kKey);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << value;
    EXPECT_EQ(status.error_message().find(kKey), std::string::npos) << value;
  }
}

class AuthTest : public FrontendFixture {
 protected:
  GrpcOptions options() const override {
    GrpcOptions options = FrontendFixture::options();
    options.api_key = kKey;
    return options;
  }

  grpc::Status health_with(const std::string& authorization) {
    grpc::ClientContext context;
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    v1::HealthResponse health;
    return stub_->Health(&context, v1::HealthRequest{}, &health);
  }
};

TEST_F(AuthTest, EveryMethodRefusesACallWithoutTheKey) {
  const GenerateResult generated = generate(token_request({1}));
  EXPECT_EQ(generated.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(generated.status.error_message().find("authorization"), std::string::npos);
  EXPECT_TRUE(fake_.wait_for_submitted(0).empty());
  {
    grpc::ClientContext context;
    v1::AbortRequest abort;
    abort.set_request_id("r-1");
    v1::AbortResponse aborted;
    EXPECT_EQ(stub_->Abort(&context, abort, &aborted).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(fake_.aborted().empty());
  }
  EXPECT_EQ(health_with("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext context;
    v1::ModelInfoResponse model;
    EXPECT_EQ(stub_->ModelInfo(&context, {}, &model).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  grpc::ClientContext context;
  v1::ClusterInfoResponse cluster;
  EXPECT_EQ(stub_->ClusterInfo(&context, {}, &cluster).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Each counts as headway_request_rejected_total{reason="unauthorized"}.
  EXPECT_EQ(fake_.unauthorized(), 5u);
}

TEST_F(AuthTest, AWrongKeyIsRefused) {
  const grpc::Status status = health_with("Bearer not-the-key");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(generate(token_request({1}), "not-the-key").status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthTest, TheRightKeyIsAccepted) {
  EXPECT_TRUE(health_with(std::string("Bearer ") + kKey).ok());
  fake_.set_script({.tokens = {79, 75}, .finish = Finish::kLength});
  const GenerateResult result = generate(token_request({1}), kKey);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.text(), "OK");
}

TEST_F(AuthTest, TheStandardHealthServiceNeedsNoKey) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace headway::serving::testing
