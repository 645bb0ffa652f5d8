// The gRPC API compiles, its messages round-trip, and headway.v1 stays wire-compatible: the
// numbers of fields that clients already send never change.
#include <gtest/gtest.h>
#include <headway/v1/headway.grpc.pb.h>

#include <string>
#include <utility>
#include <vector>

namespace {

const google::protobuf::Descriptor* message_named(const std::string& name) {
  return google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(name);
}

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

TEST(Proto, ChatPromptAndTheNewSamplingFieldsRoundTrip) {
  headway::v1::GenerateRequest request;
  request.set_model("tiny");
  auto* message = request.mutable_chat()->add_messages();
  message->set_role("user");
  message->set_content("Hi");
  auto& sampling = *request.mutable_sampling();
  sampling.set_top_k(40);
  sampling.set_min_p(0.1f);
  sampling.set_ignore_eos(true);
  sampling.add_stop_token_ids(2);
  std::string bytes;
  ASSERT_TRUE(request.SerializeToString(&bytes));

  headway::v1::GenerateRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.model(), "tiny");
  ASSERT_EQ(parsed.prompt_case(), headway::v1::GenerateRequest::kChat);
  ASSERT_EQ(parsed.chat().messages_size(), 1);
  EXPECT_EQ(parsed.chat().messages(0).role(), "user");
  EXPECT_EQ(parsed.chat().messages(0).content(), "Hi");
  EXPECT_EQ(parsed.sampling().top_k(), 40u);
  EXPECT_FLOAT_EQ(parsed.sampling().min_p(), 0.1f);
  EXPECT_TRUE(parsed.sampling().ignore_eos());
  ASSERT_EQ(parsed.sampling().stop_token_ids_size(), 1);
  EXPECT_EQ(parsed.sampling().stop_token_ids(0), 2);
}

// top_p and max_tokens carry presence, so the server can tell "not sent" from an explicit 0.
TEST(Proto, TopPAndMaxTokensDistinguishUnsetFromZero) {
  headway::v1::SamplingParams unset;
  EXPECT_FALSE(unset.has_top_p());
  EXPECT_FALSE(unset.has_max_tokens());
  headway::v1::SamplingParams zero;
  zero.set_top_p(0.0f);
  zero.set_max_tokens(0);
  std::string bytes;
  ASSERT_TRUE(zero.SerializeToString(&bytes));
  headway::v1::SamplingParams parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_TRUE(parsed.has_top_p());
  EXPECT_TRUE(parsed.has_max_tokens());
}

TEST(Proto, FieldNumbersOfTheFirstReleaseAreUnchanged) {
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, int>>>> expected = {
      {"headway.v1.SamplingParams",
       {{"temperature", 1}, {"top_p", 2}, {"seed", 3}, {"max_tokens", 4}, {"stop", 5}}},
      {"headway.v1.GenerateRequest",
       {{"request_id", 1},
        {"text", 2},
        {"token_ids", 3},
        {"sampling", 4},
        {"priority", 5},
        {"request_class", 6}}},
      {"headway.v1.GenerateResponse",
       {{"request_id", 1},
        {"token_ids", 2},
        {"text_delta", 3},
        {"finish_reason", 4},
        {"usage", 5},
        {"timings", 6}}},
      {"headway.v1.ModelInfoResponse", {{"name", 1}, {"max_model_len", 2}, {"vocab", 3}}},
      {"headway.v1.HealthResponse", {{"serving", 1}, {"engines_alive", 2}, {"engines_total", 3}}},
  };
  for (const auto& [message, fields] : expected) {
    const auto* descriptor = message_named(message);
    ASSERT_NE(descriptor, nullptr) << message;
    for (const auto& [field, number] : fields) {
      const auto* found = descriptor->FindFieldByName(field);
      ASSERT_NE(found, nullptr) << message << "." << field;
      EXPECT_EQ(found->number(), number) << message << "." << field;
    }
  }
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

}  // namespace
