#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/serving/bench/completion_request.h>

#include <nlohmann/json.hpp>

namespace headway::serving::bench {
namespace {

TEST(CompletionRequest, TokenIdsStayInsideTheVocabulary) {
  EXPECT_EQ(token_id_range(std::nullopt).first, 32);
  EXPECT_EQ(token_id_range(std::nullopt).end, 128);
  EXPECT_EQ(token_id_range(320u).first, 32);
  EXPECT_EQ(token_id_range(320u).end, 320);
  EXPECT_EQ(token_id_range(50u).first, 0);  // too small to skip the low ids
  EXPECT_THROW(token_id_range(0u), core::Error);
  EXPECT_THROW(token_id_range(3'000'000'000u), core::Error);

  const TokenIdRange range = token_id_range(40u);
  const core::WorkloadRequest request{.id = 9, .prompt_tokens = 2000, .shared_prefix_tokens = 500};
  for (int32_t id : core::synthetic_prompt(5, request, range)) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 40);
  }
}

TEST(CompletionRequest, BodyAsksForEveryTokenAsAStreamWithUsage) {
  core::WorkloadRequest request{
      .id = 4, .class_index = 0, .arrival = 0.5, .prompt_tokens = 3, .output_tokens = 17};
  const auto body = nlohmann::json::parse(
      completion_body(request, "chat", "tiny", std::vector<int32_t>{40, 41, 42}));
  EXPECT_EQ(body["prompt"], nlohmann::json({40, 41, 42}));
  EXPECT_EQ(body["max_tokens"], 17);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["request_class"], "chat");
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_FALSE(body.contains("priority"));

  request.priority = 2;
  const auto no_model = nlohmann::json::parse(completion_body(request, "chat", "", {40}));
  EXPECT_FALSE(no_model.contains("model"));
  EXPECT_EQ(no_model["priority"], 2);
}

}  // namespace
}  // namespace headway::serving::bench
