// The cuda model's batch checks, which run before anything reaches a device, and the padded layout
// of graph steps (StepPlan::layout, no pinned memory): tested on every machine. (Whether the
// kernels compute the same on a padded plan is checked on a GPU, cuda_model_test.)
#include "step_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
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

TEST(CudaStepPlan, GraphBatchBucketsAreOneTwoFourThenMultiplesOfEight) {
  EXPECT_EQ(graph_batch_bucket(1, 64), 1u);
  EXPECT_EQ(graph_batch_bucket(2, 64), 2u);
  EXPECT_EQ(graph_batch_bucket(3, 64), 4u);
  EXPECT_EQ(graph_batch_bucket(5, 64), 8u);
  EXPECT_EQ(graph_batch_bucket(9, 64), 16u);
  EXPECT_EQ(graph_batch_bucket(64, 64), 64u);
  EXPECT_EQ(graph_batch_bucket(65, 64), 0u);
  EXPECT_EQ(graph_batch_bucket(5, 6), 6u);
  EXPECT_EQ(graph_batch_bucket(0, 64), 0u);
  EXPECT_EQ(graph_batch_bucket(1, 0), 0u);
}

// Requests of a step: each a context (tokens already cached) and a number of new tokens.
class GraphSteps : public ::testing::Test {
 protected:
  // 2 kv heads x group 2 = 4 heads, head_dim 16, blocks of 4 tokens, 1,024 blocks.
  kernels::KvLayout layout{2, 2, 16, 4};
  StepLimits limits{100, 4096, 1024, 2, true, true, kernels::kAttentionTileRows, 8};

  struct Request {
    uint32_t context;
    uint32_t tokens = 1;
    bool sample = true;
    bool all_logits = false;  // hw_model_slice.all_logits
    bool wanted = false;      // hw_model_batch.logits_wanted
  };

  const StepPlan& plan(const std::vector<Request>& requests) {
    slices_.clear();
    ids_.clear();
    tables_.clear();
    wanted_.clear();
    ids_.reserve(requests.size());
    tables_.reserve(requests.size());
    bool any_wanted = false;
    for (size_t i = 0; i < requests.size(); ++i) {
      const Request& r = requests[i];
      ids_.emplace_back(r.tokens, 7);
      const uint32_t end = r.context + r.tokens;
      std::vector<uint32_t> table((end + 3) / 4);
      for (size_t b = 0; b < table.size(); ++b)
        table[b] = static_cast<uint32_t>(i * 100 + b) % 1024;
      tables_.push_back(std::move(table));
      slices_.push_back(
          hw_model_slice{100 + i, r.context, r.tokens, ids_.back().data(), tables_.back().data(),
                         static_cast<uint32_t>(tables_.back().size()), r.sample ? 1 : 0, 0.0f, 1.0f,
                         0, 0, 0, 0.0f, r.all_logits ? 1u : 0u});
      wanted_.push_back(r.wanted ? 1 : 0);
      any_wanted = any_wanted || r.wanted;
    }
    const hw_model_batch batch{sizeof(hw_model_batch), slices_.data(),
                               static_cast<uint32_t>(slices_.size()), 4,
                               any_wanted ? wanted_.data() : nullptr};
    plan_.layout(batch, layout, limits);
    return plan_;
  }

 private:
  std::vector<hw_model_slice> slices_;
  std::vector<std::vector<int32_t>> ids_;
  std::vector<std::vector<uint32_t>> tables_;
  std::vector<uint8_t> wanted_;
  StepPlan plan_;
};

TEST_F(GraphSteps, ADecodeStepIsPaddedAndPadRowsWriteNoKv) {
  const StepPlan& p = plan({{10}, {20}, {30}});
  EXPECT_EQ(p.graph_key(), (uint64_t{4} << 8) | 1);
  EXPECT_EQ(p.tokens(), 4u);
  EXPECT_EQ(p.sample_count(), 3u);
  EXPECT_EQ(p.head_rows(), 4u);
  ASSERT_EQ(p.slot_offsets().size(), 4u);
  EXPECT_GE(p.slot_offsets()[2], 0);
  EXPECT_EQ(p.slot_offsets()[3], -1);
  // One unit per row, written directly; the pad row's key range is empty.
  ASSERT_EQ(p.decode_units().size(), 4u);
  for (int32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(p.decode_units()[r].q_row, r);
    EXPECT_EQ(p.decode_units()[r].partial, -1);
  }
  EXPECT_EQ(p.decode_units()[2].key_end, 31);
  EXPECT_EQ(p.decode_units()[3].key_begin, p.decode_units()[3].key_end);
  EXPECT_TRUE(p.reduce_units().empty());
  EXPECT_EQ(p.head_row_indices(), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST_F(GraphSteps, StepsOfOneShapeHaveTheSameOffsets) {
  const StepOffsets a = plan({{10}, {20}, {30}}).offsets();
  const uint64_t key = plan({{10}, {20}, {30}}).graph_key();
  // Other contexts (longer block tables), one request more: the same shape.
  const StepPlan& p = plan({{90}, {170}, {5}, {60}});
  const StepOffsets& b = p.offsets();
  EXPECT_EQ(p.graph_key(), key);
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.slot_offsets, b.slot_offsets);
  EXPECT_EQ(a.sample_rows, b.sample_rows);
  EXPECT_EQ(a.sample_params, b.sample_params);
  EXPECT_EQ(a.decode_units, b.decode_units);
  EXPECT_EQ(a.reduce_units, b.reduce_units);
  EXPECT_EQ(a.block_tables, b.block_tables);
  EXPECT_GT(b.total, a.total);  // only the block tables, last, grew
}

TEST_F(GraphSteps, EveryRowGetsTheSplitLevelOfTheLongestContext) {
  // 701 keys: 3 splits of 8 chunks (256, 256, 189 keys); 6 keys: 1. Level: 4 per row.
  const StepPlan& p = plan({{700}, {5}});
  EXPECT_EQ(p.graph_key(), (uint64_t{2} << 8) | 4);
  EXPECT_EQ(p.graph_split_level(), 4u);
  const auto& u = p.decode_units();
  ASSERT_EQ(u.size(), 8u);
  const int32_t heads = 4;
  for (int32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(u[i].q_row, i / 4) << i;
    EXPECT_EQ(u[i].partial, i * heads) << i;  // row r's split s: record (r * 4 + s) * heads
  }
  EXPECT_EQ(u[0].key_begin, 0);
  EXPECT_EQ(u[0].key_end, 256);
  EXPECT_EQ(u[2].key_begin, 512);
  EXPECT_EQ(u[2].key_end, 701);
  EXPECT_EQ(u[3].key_begin, u[3].key_end);  // row 0's fourth: empty
  EXPECT_EQ(u[4].key_end, 6);               // row 1's own range, now through the reduce
  EXPECT_EQ(u[5].key_begin, u[5].key_end);
  ASSERT_EQ(p.reduce_units().size(), 2u);
  EXPECT_EQ(p.reduce_units()[1].q_row, 1);
  EXPECT_EQ(p.reduce_units()[1].partial, 4 * heads);
  EXPECT_EQ(p.reduce_units()[1].splits, 4);
  EXPECT_EQ(p.partial_records(), 2u * 4 * heads);
}

TEST_F(GraphSteps, RowsThatAreNotSampledAreHeadRowsAfterTheSampledOnes) {
  // A one-token prompt chunk that samples nothing, between two decodes; one pad row.
  const StepPlan& p = plan({{10}, {3, 1, false}, {12}});
  EXPECT_EQ(p.sample_count(), 2u);
  // Each row once: the final norm updates the residual of its rows in place.
  EXPECT_EQ(p.head_row_indices(), (std::vector<int32_t>{0, 2, 1, 3}));
}

TEST_F(GraphSteps, SmallBatchesSplitDecodesFurtherToFillTheGpu) {
  limits.graph_max_batch = 0;
  limits.decode_blocks_wanted = 32;  // blocks: units x 2 kv heads
  // One decode of 701 keys: 32 blocks / 2 kv heads = 16 splits wanted; by context it takes 3;
  // ranges of at least 64 keys allow 11: 11 ranges of 2 chunks (64 keys), the last of 61.
  const StepPlan& one = plan({{700}});
  ASSERT_EQ(one.decode_units().size(), 11u);
  EXPECT_EQ(one.decode_units()[0].key_end, 64);
  EXPECT_EQ(one.decode_units()[10].key_begin, 640);
  EXPECT_EQ(one.decode_units()[10].key_end, 701);
  ASSERT_EQ(one.reduce_units().size(), 1u);
  EXPECT_EQ(one.reduce_units()[0].splits, 11);
  // Two decodes and a prefill: 32 / (2 x 2) = 8 splits each at most; the short one is one unit
  // (6 keys: finer than 64 keys a range is never cut); the prefill is not counted.
  const StepPlan& two = plan({{700}, {5}, {0, 4}});
  EXPECT_EQ(two.reduce_units().size(), 1u);
  EXPECT_EQ(two.reduce_units()[0].splits, 8);  // 22 chunks in 8 ranges of 3: 8 units
  EXPECT_EQ(two.decode_units().size(), 9u);
  // A batch that fills the GPU as it is splits by context alone (256 keys a range).
  const StepPlan& many = plan(std::vector<Request>(16, Request{700}));
  EXPECT_EQ(many.decode_units().size(), 16u * 3);
  // A graph step: its padding row does not count as a decode (3 decodes: 32 / 6 = 6 splits
  // wanted, not 32 / 8 = 4), and every row takes the level of the most split one.
  limits.graph_max_batch = 8;
  const StepPlan& graph = plan({{700}, {5}, {30}});
  EXPECT_EQ(graph.tokens(), 4u);
  EXPECT_EQ(graph.graph_split_level(), 8u);  // 22 chunks in 6 ranges of 4: level 8
  EXPECT_EQ(graph.decode_units().size(), 4u * 8);
  EXPECT_EQ(graph.decode_units()[5].key_begin, 640);  // row 0's 6th range, its last
  EXPECT_EQ(graph.decode_units()[5].key_end, 701);
  EXPECT_EQ(graph.decode_units()[6].key_begin, graph.decode_units()[6].key_end);  // then empty
  limits.graph_max_batch = 0;
  // Deterministic mode splits nothing.
  limits.split_decode = false;
  EXPECT_EQ(plan({{700}}).decode_units().size(), 1u);
}

// Coarser ranges (StepLimits::decode_keys_per_split) for a batch that fills the GPU unsplit.
TEST_F(GraphSteps, DecodeKeysPerSplitSetsTheRangesOfAFullBatch) {
  limits.graph_max_batch = 0;
  limits.decode_blocks_wanted = 32;
  const std::vector<Request> batch(16, Request{2047});    // 2,048 keys each, 32 blocks unsplit
  EXPECT_EQ(plan(batch).decode_units().size(), 16u * 8);  // 256 keys a range
  limits.decode_keys_per_split = 1024;
  const StepPlan& coarse = plan(batch);
  ASSERT_EQ(coarse.decode_units().size(), 16u * 2);
  EXPECT_EQ(coarse.decode_units()[0].key_end, 1024);
  EXPECT_EQ(coarse.decode_units()[1].key_begin, 1024);
  EXPECT_EQ(coarse.reduce_units().size(), 16u);
  limits.decode_keys_per_split = 4096;  // no split: each decode writes its output itself
  EXPECT_EQ(plan(batch).decode_units().size(), 16u);
  EXPECT_TRUE(plan(batch).reduce_units().empty());
  limits.decode_keys_per_split = 0;  // not by context: the same here
  EXPECT_EQ(plan(batch).decode_units().size(), 16u);
  // ... while a batch too small for the GPU is still split to fill it (32 blocks / 2 kv heads).
  const StepPlan& one = plan({{2047}});
  EXPECT_EQ(one.decode_units().size(), 16u);
}

// Prefill tiles that give few blocks split their keys (StepLimits::prefill_split_min_keys), into
// ranges of whole 32-key chunks whose records attention_reduce merges per token.
TEST_F(GraphSteps, PrefillTilesDeepInAContextSplitTheirKeysWhenAsked) {
  limits.graph_max_batch = 0;
  limits.decode_blocks_wanted = 32;  // the fixture's tiles: 32 rows / group 2 = 16 tokens
  // Off (0): a 20-token chunk at 2,000 is two tiles, unsplit.
  EXPECT_TRUE(plan({{2000, 20}}).reduce_units().empty());
  limits.prefill_split_min_keys = 256;
  // 2 tiles x 2 kv heads = 4 blocks: 8 splits wanted; 2,016 and 2,020 keys allow 7. The first
  // tile (16 tokens, 2,016 keys = 63 chunks): 7 ranges of 9 chunks.
  const StepPlan& deep = plan({{2000, 20}});
  ASSERT_EQ(deep.prefill_units().size(), 14u);
  ASSERT_EQ(deep.reduce_units().size(), 2u);
  const auto& u = deep.prefill_units();
  EXPECT_EQ(u[0].tokens, 16);
  EXPECT_EQ(u[0].key_begin, 0);
  EXPECT_EQ(u[0].key_end, 288);
  EXPECT_EQ(u[6].key_begin, 1728);
  EXPECT_EQ(u[6].key_end, 2016);
  EXPECT_EQ(u[1].partial, u[0].partial + 16 * 4);  // 16 tokens x 4 heads a split
  EXPECT_EQ(u[7].q_row, 16);                       // the second tile: 4 tokens
  EXPECT_EQ(u[7].tokens, 4);
  EXPECT_EQ(u[13].key_end, 2020);
  EXPECT_EQ(deep.reduce_units()[0].tokens, 16);
  EXPECT_EQ(deep.reduce_units()[0].splits, 7);
  EXPECT_EQ(deep.reduce_units()[1].q_row, 16);
  EXPECT_EQ(deep.reduce_units()[1].partial, 7 * 16 * 4);
  EXPECT_EQ(deep.partial_records(), 7u * 16 * 4 + 7u * 4 * 4);
  // Too shallow to split (300 keys: under twice 256), or enough tiles already (16 tiles x 2 kv
  // heads = 32 blocks), or deterministic mode: one unit a tile.
  EXPECT_TRUE(plan({{280, 20}}).reduce_units().empty());
  EXPECT_TRUE(plan({{2000, 256}}).reduce_units().empty());
  limits.split_decode = false;
  EXPECT_TRUE(plan({{2000, 20}}).reduce_units().empty());
}

// StepLimits::prefill_longest_first: the same prefill units, the ones with the most keys first (a
// deep chunk's tiles before a fresh prompt's, a prompt's last tile before its first); decodes
// and reduce units as without it.
TEST_F(GraphSteps, PrefillUnitsCanBeOrderedLongestFirst) {
  limits.graph_max_batch = 0;
  const std::vector<Request> step = {{0, 40}, {500}, {1000, 20}};
  const auto keys = [](const kernels::AttentionUnit& u) { return u.key_end - u.key_begin; };
  const auto by_row = [](const kernels::AttentionUnit& a, const kernels::AttentionUnit& b) {
    return a.q_row < b.q_row;
  };
  // The fixture's tiles: 32 rows / group 2 = 16 tokens. In slice order: keys 16, 32, 40, then
  // 1,016 and 1,020.
  std::vector<kernels::AttentionUnit> in_order = plan(step).prefill_units();
  const std::vector<kernels::AttentionUnit> decodes = plan(step).decode_units();
  const std::vector<kernels::AttentionReduceUnit> reduces = plan(step).reduce_units();
  ASSERT_EQ(decodes.size(), 2u);  // the decode at 500 (501 keys) in two ranges
  ASSERT_EQ(reduces.size(), 1u);
  ASSERT_EQ(in_order.size(), 5u);
  EXPECT_EQ(keys(in_order[0]), 16);
  EXPECT_EQ(keys(in_order[4]), 1020);
  limits.prefill_longest_first = true;
  std::vector<kernels::AttentionUnit> sorted = plan(step).prefill_units();
  ASSERT_EQ(sorted.size(), 5u);
  std::vector<int32_t> sorted_keys;
  for (const auto& u : sorted) sorted_keys.push_back(keys(u));
  EXPECT_EQ(sorted_keys, (std::vector<int32_t>{1020, 1016, 40, 32, 16}));
  const auto same_bytes = [](const auto& a, const auto& b) {
    return a.size() == b.size() &&
           std::memcmp(a.data(), b.data(), a.size() * sizeof(a.front())) == 0;
  };
  EXPECT_TRUE(same_bytes(plan(step).decode_units(), decodes));
  EXPECT_TRUE(same_bytes(plan(step).reduce_units(), reduces));
  std::sort(in_order.begin(), in_order.end(), by_row);
  std::sort(sorted.begin(), sorted.end(), by_row);
  for (size_t i = 0; i < in_order.size(); ++i) {
    EXPECT_EQ(std::memcmp(&in_order[i], &sorted[i], sizeof(kernels::AttentionUnit)), 0) << i;
  }
}

TEST_F(GraphSteps, PrefillsAndLargeStepsRunLaunchByLaunch) {
  EXPECT_EQ(plan({{10}, {0, 4}}).graph_key(), 0u);  // a prefill slice
  std::vector<Request> nine(9, Request{10});
  EXPECT_EQ(plan(nine).graph_key(), 0u);  // above graph_max_batch 8
  const StepPlan& p = plan({{10}, {20}, {30}});
  EXPECT_NE(p.graph_key(), 0u);
  limits.graph_max_batch = 0;
  EXPECT_EQ(plan({{10}, {20}, {30}}).graph_key(), 0u);
  EXPECT_EQ(plan({{10}, {20}, {30}}).tokens(), 3u);
}

// Logits rows for the host (StepPlan::logits_copies): which head rows go to which output rows.
class LogitsRows : public GraphSteps {};

using Copies = std::vector<LogitsCopy>;

TEST_F(LogitsRows, HostSamplingCopiesEverySampledRowInOneRun) {
  limits.sample_on_device = false;
  const StepPlan& p = plan({{0, 5}, {10}, {0, 4, false}});
  EXPECT_EQ(p.logits_rows(), 2u);
  EXPECT_EQ(p.logits_copies(), (Copies{{0, 0, 2}}));
  EXPECT_EQ(p.head_row_indices(), (std::vector<int32_t>{4, 5}));
}

TEST_F(LogitsRows, DeviceSamplingCopiesOnlyTheRowsAskedFor) {
  EXPECT_TRUE(plan({{10}, {20}, {30}}).logits_copies().empty());
  EXPECT_EQ(plan({{10}, {20}, {30}}).logits_rows(), 0u);
  // A graph step (padded to 4 rows) still copies the one asked for.
  const StepPlan& p = plan({{10}, {20, 1, true, false, true}, {30}});
  EXPECT_NE(p.graph_key(), 0u);
  EXPECT_EQ(p.head_rows(), 4u);
  EXPECT_EQ(p.logits_rows(), 1u);
  EXPECT_EQ(p.logits_copies(), (Copies{{1, 0, 1}}));
  // Rows that are not adjacent are copied one by one, in slice order.
  const StepPlan& q = plan({{10, 1, true, false, true}, {20}, {30, 1, true, false, true}});
  EXPECT_EQ(q.logits_copies(), (Copies{{0, 0, 1}, {2, 1, 1}}));
  // A slice that does not sample has no row to ask for.
  EXPECT_TRUE(plan({{0, 4, false, false, true}, {20}}).logits_copies().empty());
}

TEST_F(LogitsRows, PromptPositionsBecomeHeadRowsAfterTheSampledOnes) {
  // A: 4 prompt tokens, sampling, all logits (rows 0-3); B: a decode nobody asked about (row 4);
  // C: a prompt chunk of 3 that does not sample, all logits (rows 5-7).
  const StepPlan& p = plan({{0, 4, true, true, true}, {10}, {8, 3, false, true}});
  EXPECT_EQ(p.sample_count(), 2u);
  EXPECT_EQ(p.head_row_indices(), (std::vector<int32_t>{3, 4, 0, 1, 2, 5, 6, 7}));
  // Output order: A's positions 0-2, A's sampled row, C's three positions.
  EXPECT_EQ(p.logits_copies(), (Copies{{2, 0, 3}, {0, 3, 1}, {5, 4, 3}}));
  EXPECT_EQ(p.logits_rows(), 7u);
}

TEST_F(LogitsRows, AStepWithPromptRowsIsNotAGraphStep) {
  const StepPlan& p = plan({{10}, {3, 1, true, true, true}});
  EXPECT_EQ(p.graph_key(), 0u);
  EXPECT_EQ(p.head_rows(), 2u);
  EXPECT_EQ(p.logits_copies(), (Copies{{1, 0, 1}}));
}

}  // namespace
}  // namespace headway::models::cuda
