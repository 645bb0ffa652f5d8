// start(), port() and stop(): binding errors name the address, stop() is idempotent, and a stream
// still open at stop() is cancelled and its request aborted.
#include <grpc/health/v1/health.grpc.pb.h>
#include <gtest/gtest.h>
#include <headway/core/error.h>

#include <chrono>
#include <future>
#include <thread>

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
    EXPECT_NE(std::string(error.what())
                  .find("127.0.0.1:" + std::to_string(first.port()) + ": the port is in use"),
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

TEST(GrpcFrontendLifecycle, StopCancelsAStreamStillOpenAfterTheGracePeriodAndAbortsIt) {
  FakeGenerationService fake;
  fake.set_script({.tokens = {72}, .finish = Finish::kNone});
  GrpcOptions options = ephemeral();
  options.shutdown_grace = std::chrono::milliseconds(200);
  GrpcFrontend frontend(fake, options);
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

// Stopping with a grace period far longer than any test: what stop() waits for must end by itself.
class StopWithALongGrace : public ::testing::Test {
 protected:
  void SetUp() override {
    GrpcOptions options = ephemeral();
    options.shutdown_grace = std::chrono::hours(1);
    frontend_ = std::make_unique<GrpcFrontend>(fake_, options);
    frontend_->start();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  // Runs stop() on another thread; true when it returned within kWaitGuard.
  bool stop_returns(grpc::ClientContext& open_call) {
    stopping_ = std::async(std::launch::async, [this] { frontend_->stop(); });
    const bool returned = stopping_.wait_for(kWaitGuard) == std::future_status::ready;
    // Else end the call it waits for, so that the test fails instead of hanging for the grace.
    if (!returned) open_call.TryCancel();
    stopping_.wait();
    return returned;
  }

  FakeGenerationService fake_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::shared_ptr<grpc::Channel> channel_;
  std::future<void> stopping_;
};

// A load balancer's or Kubernetes probe's Watch never ends by itself; waiting for it made every
// shutdown of a watched server last the whole grace period.
TEST_F(StopWithALongGrace, DoesNotWaitForAnOpenHealthWatch) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  auto watch = health->Watch(&context, request);
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));

  EXPECT_TRUE(stop_returns(context)) << "stop() waited for the health Watch stream";
  while (watch->Read(&response)) {
  }
  EXPECT_FALSE(watch->Finish().ok());
}

// Calls made once stop() began are refused, while one in progress gets its grace period and
// finishes normally.
TEST_F(StopWithALongGrace, RefusesNewCallsAndLetsTheOneInProgressFinish) {
  fake_.set_script({.tokens = {72}, .finish = Finish::kNone});
  auto stub = v1::Headway::NewStub(channel_);
  grpc::ClientContext context;
  v1::GenerateRequest request;
  request.set_request_id("r-finishing");
  request.set_text("finishes during the grace period");
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));

  stopping_ = std::async(std::launch::async, [this] { frontend_->stop(); });
  grpc::Status refused;
  for (const auto until = std::chrono::steady_clock::now() + kWaitGuard;
       std::chrono::steady_clock::now() < until;) {
    grpc::ClientContext health_context;
    v1::HealthResponse health;
    refused = stub->Health(&health_context, {}, &health);
    if (!refused.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_NE(refused.error_message().find("shutting down"), std::string::npos)
      << refused.error_message();

  fake_.push("r-finishing", {73});
  fake_.finish("r-finishing", Finish::kLength);
  std::vector<int32_t> ids(response.token_ids().begin(), response.token_ids().end());
  while (reader->Read(&response)) {
    ids.insert(ids.end(), response.token_ids().begin(), response.token_ids().end());
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{72, 73}));
  EXPECT_TRUE(fake_.aborted().empty());
  ASSERT_EQ(stopping_.wait_for(kWaitGuard), std::future_status::ready);
}

}  // namespace
}  // namespace headway::serving::testing
