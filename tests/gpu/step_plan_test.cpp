// The cuda model's batch checks, which run before anything reaches a device: they are tested on
// every machine. (How the plan is cut into attention work is checked with the kernels, on a GPU.)
#include "step_plan.h"

#include <gtest/gtest.h>

#include <headway/sdk/status.hpp>
#include <string>
#include <vector>

namespace headway::models::cuda {
namespace {

struct Fixture {
  std::vector<int32_t> ids = {1, 2, 3, 4};
  std::vector<uint32_t> table = {5, 6};
  hw_model_slice slice{42, 0, 4, ids.data(), table.data(), 2, 1, 0.0f, 1.0f, 0, 0, 0, 0.0f, 0};
  kernels::KvLayout layout{2, 2, 16, 4};
  StepLimits limits{100, 64, 8, 2, true};

  std::string error() {
    hw_model_batch batch{sizeof(hw_model_batch), &slice, 1, 4};
    StepPlan plan;
    try {
      plan.build(batch, layout, limits);
    } catch (const sdk::Error& e) {
      EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
      return e.what();
    }
    return "";
  }
};

void expect_error(Fixture& f, const std::string& fragment) {
  const std::string message = f.error();
  EXPECT_NE(message.find("slice 0 (request 42)"), std::string::npos) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
}

TEST(CudaStepPlan, RejectsTokenIdsOutsideTheVocabulary) {
  Fixture f;
  f.ids[2] = 100;
  expect_error(f, "token id 100 at position 2 is outside the vocabulary of 100");
}

TEST(CudaStepPlan, RejectsBlockIdsBeyondTheCache) {
  Fixture f;
  f.table[0] = 8;
  expect_error(f, "block id 8 is beyond the 8 blocks");
}

TEST(CudaStepPlan, RejectsShortBlockTables) {
  Fixture f;
  f.slice.block_count = 0;
  expect_error(f, "does not cover position 3");
}

TEST(CudaStepPlan, RejectsPositionsPastMaxModelLen) {
  Fixture f;
  f.slice.start = 62;
  f.slice.block_count = 2;
  expect_error(f, "exceed max_model_len 64");
}

TEST(CudaStepPlan, RejectsEmptySlicesAndMissingIds) {
  Fixture f;
  f.slice.tokens = 0;
  expect_error(f, "has no tokens");
  Fixture g;
  g.slice.token_ids = nullptr;
  expect_error(g, "token_ids is NULL");
}

TEST(CudaStepPlan, RejectsBadSamplingParametersWhenSamplingOnTheDevice) {
  Fixture f;
  f.slice.temperature = -1.0f;
  expect_error(f, "temperature must be >= 0");
  Fixture g;
  g.slice.top_p = 0.0f;
  expect_error(g, "top_p must be in (0, 1]");
  Fixture h;
  h.slice.min_p = 2.0f;
  expect_error(h, "min_p must be in [0, 1]");
}

TEST(CudaStepPlan, RejectsAnotherBlockSize) {
  Fixture f;
  hw_model_batch batch{sizeof(hw_model_batch), &f.slice, 1, 16};
  StepPlan plan;
  try {
    plan.build(batch, f.layout, f.limits);
    FAIL() << "expected an error";
  } catch (const sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch block_size 16 differs from init_kv's 4"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace headway::models::cuda
