// core::synthetic_prompt: requests of one shared beginning start with the same ids, and nothing
// else is shared; ids stay in their range and depend on the seed and the request only.
#include <gtest/gtest.h>
#include <headway/core/synthetic_prompt.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace headway::core {
namespace {

WorkloadRequest request(uint64_t id, uint32_t prompt, uint32_t shared_tokens = 0,
                        uint32_t beginning = 0, uint32_t class_index = 0) {
  WorkloadRequest r{};
  r.id = id;
  r.class_index = class_index;
  r.prompt_tokens = prompt;
  r.shared_prefix_tokens = shared_tokens;
  r.shared_prefix = beginning;
  return r;
}

// How many ids two prompts have in common from the start.
size_t common_start(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first -
                             a.begin());
}

TEST(SyntheticPrompt, OwnIdsDependOnTheSeedAndTheRequestOnly) {
  const TokenIdRange range{32, 320};
  EXPECT_EQ(synthetic_prompt(1, request(2, 50), range), synthetic_prompt(1, request(2, 50), range));
  EXPECT_EQ(synthetic_prompt(1, request(2, 50), range).size(), 50u);
  EXPECT_NE(synthetic_prompt(1, request(2, 50), range), synthetic_prompt(1, request(3, 50), range));
  EXPECT_NE(synthetic_prompt(1, request(2, 50), range), synthetic_prompt(2, request(2, 50), range));
  // Two requests do not share a beginning by accident.
  EXPECT_LT(common_start(synthetic_prompt(1, request(2, 50), range),
                         synthetic_prompt(1, request(3, 50), range)),
            3u);
  for (int32_t id : synthetic_prompt(5, request(9, 2000, 700, 1), TokenIdRange{0, 40})) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 40);
  }
}

TEST(SyntheticPrompt, RequestsOfOneSharedBeginningStartWithTheSameIds) {
  const TokenIdRange range{0, 128256};
  const auto a = synthetic_prompt(7, request(1, 600, 512, 2), range);
  const auto b = synthetic_prompt(7, request(2, 900, 512, 2), range);
  const auto other_beginning = synthetic_prompt(7, request(3, 600, 512, 1), range);
  const auto other_class = synthetic_prompt(7, request(4, 600, 512, 2, 1), range);
  EXPECT_EQ(common_start(a, b), 512u);
  EXPECT_LT(common_start(a, other_beginning), 3u);
  EXPECT_LT(common_start(a, other_class), 3u);
  // After the beginning, a request's ids are its own ones.
  const auto own = synthetic_prompt(7, request(1, 88), range);
  EXPECT_TRUE(std::equal(own.begin(), own.end(), a.begin() + 512));
  // A beginning longer than the prompt is cut to it.
  EXPECT_EQ(synthetic_prompt(7, request(5, 100, 512, 2), range),
            std::vector<int32_t>(a.begin(), a.begin() + 100));
}

// A conversation's later turn continues its first turn's stream: its prompt begins with all of the
// first turn's ids (its own and the stream's stand-in for the answer), shared beginning included.
TEST(SyntheticPrompt, AConversationsTurnBeginsWithTheTurnBeforeIt) {
  const TokenIdRange range{0, 128256};
  const WorkloadRequest first = request(4, 300, 64, 1);
  WorkloadRequest later = request(17, 900, 64, 1);
  later.turn = 2;
  later.first_turn = 4;
  const auto a = synthetic_prompt(3, first, range);
  const auto b = synthetic_prompt(3, later, range);
  EXPECT_EQ(common_start(a, b), 300u);
  // Without the turn, request 17 would be its own conversation and share only the beginning.
  later.turn = 0;
  EXPECT_EQ(common_start(a, synthetic_prompt(3, later, range)), 64u);
}

// Any span of a prompt's ids, in the shared beginning, across its end or in the request's own ids,
// is that span of the whole prompt.
TEST(SyntheticPrompt, ASpanOfThePromptIsThoseIdsOfTheWholePrompt) {
  const TokenIdRange range{32, 1000};
  const WorkloadRequest r = request(9, 500, 100, 2, 1);
  const std::vector<int32_t> whole = synthetic_prompt(5, r, range);
  for (const auto& [from, to] : std::vector<std::pair<uint32_t, uint32_t>>{
           {0, 500}, {0, 40}, {30, 100}, {60, 180}, {100, 101}, {250, 500}, {499, 500}, {7, 7}}) {
    const std::vector<int32_t> part = synthetic_prompt_ids(5, r, range, from, to);
    EXPECT_EQ(part, std::vector<int32_t>(whole.begin() + from, whole.begin() + to))
        << from << ".." << to;
  }
  // Past the end it is cut to the prompt.
  EXPECT_EQ(synthetic_prompt_ids(5, r, range, 480, 900).size(), 20u);
  EXPECT_TRUE(synthetic_prompt_ids(5, r, range, 600, 900).empty());
}

}  // namespace
}  // namespace headway::core
