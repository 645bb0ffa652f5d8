// The gRPC API compiles and its messages round-trip: the wiring the serving work builds on.
#include <gtest/gtest.h>
#include <headway/v1/headway.grpc.pb.h>

TEST(Proto, GenerateRequestRoundTrips) {
  headway::v1::GenerateRequest request;
  request.set_request_id("r-1");
  request.mutable_token_ids()->add_ids(128000);
  request.mutable_token_ids()->add_ids(42);
  request.mutable_sampling()->set_max_tokens(16);
  std::string bytes;
  ASSERT_TRUE(request.SerializeToString(&bytes));

  headway::v1::GenerateRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.request_id(), "r-1");
  ASSERT_EQ(parsed.prompt_case(), headway::v1::GenerateRequest::kTokenIds);
  EXPECT_EQ(parsed.token_ids().ids_size(), 2);
  EXPECT_EQ(parsed.sampling().max_tokens(), 16u);
}

TEST(Proto, ServiceDeclaresItsMethods) {
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("headway.v1.Headway");
  ASSERT_NE(service, nullptr);
  for (const char* method : {"Generate", "Abort", "Health", "ModelInfo", "ClusterInfo"}) {
    EXPECT_NE(service->FindMethodByName(method), nullptr) << method;
  }
  EXPECT_TRUE(service->FindMethodByName("Generate")->server_streaming());
}
