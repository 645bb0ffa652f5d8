// The unary methods: Health, ModelInfo and ClusterInfo mirror the service, and a ServiceError from
// any of them gets its mapped status code.
#include <gtest/gtest.h>

#include "frontend_fixture.h"

namespace headway::serving::testing {
namespace {

using InfoTest = FrontendFixture;

TEST_F(InfoTest, HealthMirrorsTheService) {
  fake_.set_health({.serving = false, .engines_alive = 1, .engines_total = 3});
  grpc::ClientContext context;
  v1::HealthResponse health;
  ASSERT_TRUE(stub_->Health(&context, v1::HealthRequest{}, &health).ok());
  EXPECT_FALSE(health.serving());
  EXPECT_EQ(health.engines_alive(), 1u);
  EXPECT_EQ(health.engines_total(), 3u);
}

TEST_F(InfoTest, ModelInfoMirrorsTheService) {
  fake_.set_model({.name = "llama-tiny",
                   .max_model_len = 2048,
                   .vocab = 32000,
                   .tokenizer = "bpe",
                   .layers = 32,
                   .kv_heads = 8,
                   .head_dim = 128});
  grpc::ClientContext context;
  v1::ModelInfoResponse model;
  ASSERT_TRUE(stub_->ModelInfo(&context, v1::ModelInfoRequest{}, &model).ok());
  EXPECT_EQ(model.name(), "llama-tiny");
  EXPECT_EQ(model.max_model_len(), 2048u);
  EXPECT_EQ(model.vocab(), 32000u);
  EXPECT_EQ(model.tokenizer(), "bpe");
  // The KV shape, by which a router tells apart models of one vocabulary (8B and 70B).
  EXPECT_EQ(model.layers(), 32u);
  EXPECT_EQ(model.kv_heads(), 8u);
  EXPECT_EQ(model.head_dim(), 128u);
  EXPECT_FALSE(model.samples_on_device());
  EXPECT_FALSE(model.ignores_token_ids());
}

// What a router reads to refuse, as its engine processes would, the processing their model
// cannot do.
TEST_F(InfoTest, ModelInfoSaysWhatProcessingTheModelCannotDo) {
  fake_.set_model({.name = "m",
                   .max_model_len = 64,
                   .vocab = 256,
                   .tokenizer = "byte",
                   .samples_on_host = false,
                   .reads_token_ids = false});
  grpc::ClientContext context;
  v1::ModelInfoResponse model;
  ASSERT_TRUE(stub_->ModelInfo(&context, v1::ModelInfoRequest{}, &model).ok());
  EXPECT_TRUE(model.samples_on_device());
  EXPECT_TRUE(model.ignores_token_ids());
}

TEST_F(InfoTest, ClusterInfoMirrorsTheService) {
  ClusterSummary cluster;
  cluster.deployment = "two-pools";
  cluster.router = "length";
  cluster.engines.push_back({.index = 0,
                             .pool = "short",
                             .role = "both",
                             .alive = true,
                             .running = 4,
                             .waiting = 2,
                             .outstanding_tokens = 5000,
                             .kv_blocks_free = 10,
                             .kv_blocks_total = 64});
  cluster.engines.push_back({.index = 1, .pool = "long", .role = "prefill", .alive = false});
  fake_.set_cluster(cluster);
  grpc::ClientContext context;
  v1::ClusterInfoResponse info;
  ASSERT_TRUE(stub_->ClusterInfo(&context, v1::ClusterInfoRequest{}, &info).ok());
  EXPECT_EQ(info.deployment(), "two-pools");
  EXPECT_EQ(info.router(), "length");
  ASSERT_EQ(info.engines_size(), 2);
  const v1::EngineInfo& first = info.engines(0);
  EXPECT_EQ(first.index(), 0u);
  EXPECT_EQ(first.pool(), "short");
  EXPECT_EQ(first.role(), "both");
  EXPECT_TRUE(first.alive());
  EXPECT_EQ(first.running(), 4u);
  EXPECT_EQ(first.waiting(), 2u);
  EXPECT_EQ(first.outstanding_tokens(), 5000u);
  EXPECT_EQ(first.kv_blocks_free(), 10u);
  EXPECT_EQ(first.kv_blocks_total(), 64u);
  EXPECT_EQ(info.engines(1).index(), 1u);
  EXPECT_EQ(info.engines(1).pool(), "long");
  EXPECT_EQ(info.engines(1).role(), "prefill");
  EXPECT_FALSE(info.engines(1).alive());
}

TEST_F(InfoTest, AServiceErrorFromAnInfoCallGetsItsMappedCode) {
  fake_.fail_info_calls(ServiceError(ErrorCode::kUnavailable, "the cluster is draining"));
  {
    grpc::ClientContext context;
    v1::HealthResponse health;
    const grpc::Status status = stub_->Health(&context, v1::HealthRequest{}, &health);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(status.error_message(), "the cluster is draining");
  }
  {
    grpc::ClientContext context;
    v1::ModelInfoResponse model;
    EXPECT_EQ(stub_->ModelInfo(&context, v1::ModelInfoRequest{}, &model).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
  fake_.fail_info_calls(ServiceError(ErrorCode::kInternal, "engine table corrupt"));
  grpc::ClientContext context;
  v1::ClusterInfoResponse info;
  const grpc::Status status = stub_->ClusterInfo(&context, v1::ClusterInfoRequest{}, &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(status.error_message(), "engine table corrupt");
}

}  // namespace
}  // namespace headway::serving::testing
