// start(), port() and stop(): binding errors name the address, stop() is idempotent, and a stream
// still open at stop() is cancelled and its request aborted.
#include <gtest/gtest.h>
#include <headway/core/error.h>

#include "frontend_fixture.h"

namespace headway::serving::testing {
namespace {

GrpcOptions ephemeral() {
  GrpcOptions options;
  options.port = 0;
  return options;
}

TEST(GrpcFrontendLifecycle, PortIsZeroBeforeStartAndTheBoundOneAfter) {
  FakeGenerationService fake;
  GrpcFrontend frontend(fake, ephemeral());
  EXPECT_EQ(frontend.port(), 0);
  frontend.start();
  EXPECT_NE(frontend.port(), 0);
  frontend.stop();
  frontend.stop();  // idempotent
}

TEST(GrpcFrontendLifecycle, StopBeforeStartAndDestructionWithoutStartAreHarmless) {
  FakeGenerationService fake;
  GrpcFrontend never_started(fake, ephemeral());
  never_started.stop();
}

TEST(GrpcFrontendLifecycle, ATakenPortIsAnErrorNamingTheAddress) {
  FakeGenerationService fake;
  GrpcFrontend first(fake, ephemeral());
  first.start();
  GrpcOptions same_port = ephemeral();
  same_port.port = first.port();
  GrpcFrontend second(fake, same_port);
  try {
    second.start();
    FAIL() << "a second server bound port " << first.port();
  } catch (const core::Error& error) {
    EXPECT_NE(std::string(error.what()).find("127.0.0.1:" + std::to_string(first.port())),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(second.port(), 0);
  second.stop();
}

TEST(GrpcFrontendLifecycle, AnEmptyHostIsRefused) {
  FakeGenerationService fake;
  GrpcOptions options = ephemeral();
  options.host = "";
  GrpcFrontend frontend(fake, options);
  EXPECT_THROW(frontend.start(), core::Error);
}

TEST(GrpcFrontendLifecycle, AFrontendServesOnce) {
  FakeGenerationService fake;
  GrpcFrontend frontend(fake, ephemeral());
  frontend.start();
  EXPECT_THROW(frontend.start(), core::Error);
  frontend.stop();
  EXPECT_THROW(frontend.start(), core::Error);
}

TEST(GrpcFrontendLifecycle, ListensOnIpv6Loopback) {
  FakeGenerationService fake;
  GrpcOptions options = ephemeral();
  options.host = "::1";
  GrpcFrontend frontend(fake, options);
  try {
    frontend.start();
  } catch (const core::Error& error) {
    GTEST_SKIP() << "no IPv6 loopback here: " << error.what();
  }
  auto channel = grpc::CreateChannel("[::1]:" + std::to_string(frontend.port()),
                                     grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  v1::HealthResponse health;
  EXPECT_TRUE(v1::Headway::NewStub(channel)->Health(&context, {}, &health).ok());
  EXPECT_TRUE(health.serving());
}

// Takes kShutdownGracePeriod: stop() waits that long for the open stream before cancelling it.
TEST(GrpcFrontendLifecycle, StopCancelsAStreamStillOpenAfterTheGracePeriodAndAbortsIt) {
  FakeGenerationService fake;
  fake.set_script({.tokens = {72}, .finish = Finish::kNone});
  GrpcFrontend frontend(fake, ephemeral());
  frontend.start();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend.port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Headway::NewStub(channel);
  grpc::ClientContext context;
  v1::GenerateRequest request;
  request.set_request_id("r-open");
  request.set_text("never ends");
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));

  frontend.stop();  // returns once every handler has returned
  EXPECT_EQ(fake.aborted(), std::vector<std::string>{"r-open"});
  while (reader->Read(&response)) {
  }
  EXPECT_FALSE(reader->Finish().ok());
}

}  // namespace
}  // namespace headway::serving::testing
