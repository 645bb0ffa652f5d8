// A FakeGenerationService behind a real GrpcFrontend on an ephemeral loopback port, and a client
// channel to it: what every end-to-end test of the frontend starts from.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <headway/serving/grpc_frontend.h>
#include <headway/v1/headway.grpc.pb.h>

#include <memory>
#include <string>
#include <vector>

#include "fake_generation_service.h"

namespace headway::serving::testing {

// Everything a Generate call returned.
struct GenerateResult {
  std::vector<v1::GenerateResponse> messages;
  grpc::Status status;
  std::multimap<std::string, std::string> trailing_metadata;

  std::vector<int32_t> token_ids() const {
    std::vector<int32_t> ids;
    for (const auto& message : messages)
      ids.insert(ids.end(), message.token_ids().begin(), message.token_ids().end());
    return ids;
  }
  std::string text() const {
    std::string text;
    for (const auto& message : messages) text += message.text_delta();
    return text;
  }
};

class FrontendFixture : public ::testing::Test {
 protected:
  // Subclasses that need other options (an API key) override this.
  virtual GrpcOptions options() const {
    GrpcOptions options;
    options.port = 0;
    return options;
  }

  void SetUp() override {
    frontend_ = std::make_unique<GrpcFrontend>(fake_, options());
    frontend_->start();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Headway::NewStub(channel_);
  }

  void TearDown() override { frontend_->stop(); }

  // Sends the API key when `api_key` is not empty.
  static void authorize(grpc::ClientContext& context, const std::string& api_key) {
    if (!api_key.empty()) context.AddMetadata("authorization", "Bearer " + api_key);
  }

  GenerateResult generate(const v1::GenerateRequest& request, const std::string& api_key = {}) {
    grpc::ClientContext context;
    authorize(context, api_key);
    GenerateResult result;
    auto reader = stub_->Generate(&context, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) result.messages.push_back(response);
    result.status = reader->Finish();
    for (const auto& [key, value] : context.GetServerTrailingMetadata()) {
      result.trailing_metadata.emplace(std::string(key.data(), key.size()),
                                       std::string(value.data(), value.size()));
    }
    return result;
  }

  static v1::GenerateRequest token_request(std::vector<int32_t> ids) {
    v1::GenerateRequest request;
    for (int32_t id : ids) request.mutable_token_ids()->add_ids(id);
    return request;
  }

  FakeGenerationService fake_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Headway::Stub> stub_;
};

}  // namespace headway::serving::testing
