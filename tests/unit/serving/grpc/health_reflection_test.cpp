// The standard services beside headway.v1.Headway: grpc.health.v1 (mirroring
// GenerationService::health()) and server reflection.
#include <google/protobuf/descriptor.pb.h>
#include <grpc/health/v1/health.grpc.pb.h>
#include <gtest/gtest.h>
#include <src/proto/grpc/reflection/v1alpha/reflection.grpc.pb.h>

#include <algorithm>

#include "frontend_fixture.h"

namespace headway::serving::testing {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
namespace reflection = grpc::reflection::v1alpha;

class StandardServicesTest : public FrontendFixture {
 protected:
  HealthCheckResponse::ServingStatus check(const std::string& service,
                                           grpc::StatusCode expected = grpc::StatusCode::OK) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext context;
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    EXPECT_EQ(health->Check(&context, request, &response).error_code(), expected) << service;
    return response.status();
  }

  // One request/response exchange on a server reflection stream.
  reflection::ServerReflectionResponse reflect(const reflection::ServerReflectionRequest& request) {
    auto stub = reflection::ServerReflection::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kWaitGuard);
    auto stream = stub->ServerReflectionInfo(&context);
    reflection::ServerReflectionResponse response;
    EXPECT_TRUE(stream->Write(request));
    EXPECT_TRUE(stream->WritesDone());
    EXPECT_TRUE(stream->Read(&response));
    reflection::ServerReflectionResponse extra;
    while (stream->Read(&extra)) {
    }
    EXPECT_TRUE(stream->Finish().ok());
    return response;
  }
};

TEST_F(StandardServicesTest, HealthIsServingForTheServerAndTheHeadwayService) {
  EXPECT_EQ(check(""), HealthCheckResponse::SERVING);
  EXPECT_EQ(check("headway.v1.Headway"), HealthCheckResponse::SERVING);
  check("no.such.Service", grpc::StatusCode::NOT_FOUND);
}

class NotServingAtStartTest : public StandardServicesTest {
 protected:
  void SetUp() override {
    fake_.set_health({.serving = false, .engines_alive = 0, .engines_total = 2});
    StandardServicesTest::SetUp();
  }
};

TEST_F(NotServingAtStartTest, HealthIsNotServingFromTheFirstProbe) {
  EXPECT_EQ(check(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(check("headway.v1.Headway"), HealthCheckResponse::NOT_SERVING);
}

TEST_F(StandardServicesTest, HealthWatchersSeeTheServiceStopServing) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kWaitGuard);
  HealthCheckRequest request;
  request.set_service("headway.v1.Headway");
  auto watch = health->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  fake_.set_health({.serving = false, .engines_alive = 0, .engines_total = 1});
  ASSERT_TRUE(watch->Read(&response));  // the mirror's next refresh
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);

  fake_.set_health({.serving = true, .engines_alive = 1, .engines_total = 1});
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  context.TryCancel();
  while (watch->Read(&response)) {
  }
  watch->Finish();
}

TEST_F(StandardServicesTest, ReflectionListsTheHeadwayAndHealthServices) {
  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  const reflection::ServerReflectionResponse response = reflect(request);
  ASSERT_TRUE(response.has_list_services_response()) << response.DebugString();
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.push_back(service.name());
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "headway.v1.Headway"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());
}

TEST_F(StandardServicesTest, ReflectionDescribesTheHeadwayApi) {
  reflection::ServerReflectionRequest request;
  request.set_file_containing_symbol("headway.v1.Headway");
  const reflection::ServerReflectionResponse response = reflect(request);
  ASSERT_TRUE(response.has_file_descriptor_response()) << response.DebugString();
  ASSERT_GE(response.file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.package(), "headway.v1");
  ASSERT_EQ(file.service_size(), 1);
  EXPECT_EQ(file.service(0).name(), "Headway");
  bool generate_streams = false;
  for (const auto& method : file.service(0).method()) {
    if (method.name() == "Generate") generate_streams = method.server_streaming();
  }
  EXPECT_TRUE(generate_streams);
}

}  // namespace
}  // namespace headway::serving::testing
