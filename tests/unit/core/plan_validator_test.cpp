#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/plan_validator.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headway::core {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kBlockSize = 16;

hw_request_view running_request(uint64_t id, uint32_t total, uint32_t computed) {
  hw_request_view r{};
  r.id = id;
  r.state = computed + 1 == total ? HW_REQUEST_DECODING : HW_REQUEST_PREFILLING;
  r.prompt_tokens = total;
  r.total_tokens = total;
  r.computed_tokens = computed;
  r.max_output_tokens = 64;
  r.blocks_held = (computed + kBlockSize - 1) / kBlockSize;
  return r;
}

hw_request_view waiting_request(uint64_t id, uint32_t prompt) {
  hw_request_view r{};
  r.id = id;
  r.state = HW_REQUEST_WAITING;
  r.prompt_tokens = prompt;
  r.total_tokens = prompt;
  r.max_output_tokens = 64;
  return r;
}

// Owns a snapshot, a plan and limits; tests edit the parts and call validate().
struct Fixture {
  std::vector<hw_request_view> running;
  std::vector<hw_request_view> waiting;
  uint32_t kv_free = 100;
  uint32_t max_model_len = 4096;
  std::vector<hw_slice> slices;
  std::vector<uint64_t> preempted;
  hw_scheduler_limits limits{sizeof(hw_scheduler_limits), 256, 4};
  PlanValidator validator;

  // Capacities are running + waiting, as the engine sizes them.
  std::optional<std::string> validate(std::optional<uint32_t> slice_count = std::nullopt) {
    hw_scheduler_snapshot snapshot{};
    snapshot.struct_size = sizeof(snapshot);
    snapshot.running = running.data();
    snapshot.running_count = static_cast<uint32_t>(running.size());
    snapshot.waiting = waiting.data();
    snapshot.waiting_count = static_cast<uint32_t>(waiting.size());
    snapshot.kv_blocks_free = kv_free;
    snapshot.kv_blocks_total = 1000;
    snapshot.block_size = kBlockSize;
    snapshot.max_model_len = max_model_len;
    const uint32_t capacity = static_cast<uint32_t>(running.size() + waiting.size());
    std::vector<hw_slice> slice_array(std::max<size_t>(capacity, slices.size()));
    std::copy(slices.begin(), slices.end(), slice_array.begin());
    std::vector<uint64_t> preempted_array(std::max<size_t>(capacity, preempted.size()));
    std::copy(preempted.begin(), preempted.end(), preempted_array.begin());
    hw_scheduler_plan plan{};
    plan.struct_size = sizeof(plan);
    plan.slices = slice_array.data();
    plan.slice_capacity = capacity;
    plan.slice_count = slice_count.value_or(static_cast<uint32_t>(slices.size()));
    plan.preempted = preempted_array.data();
    plan.preempted_capacity = capacity;
    plan.preempted_count = static_cast<uint32_t>(preempted.size());
    return validator.validate(snapshot, plan, limits);
  }
};

// Two running requests (a decode of 1 and a prefill), one waiting prompt of 40 tokens.
Fixture basic() {
  Fixture f;
  f.running.push_back(running_request(1, 101, 100));  // decoding: 7 blocks, needs none more
  f.running.push_back(running_request(2, 300, 64));   // prefilling: 4 blocks held
  f.waiting.push_back(waiting_request(10, 40));       // 3 blocks to admit
  return f;
}

TEST(PlanValidator, ValidPlanPasses) {
  Fixture f = basic();
  f.slices = {{1, 100, 1}, {2, 64, 100}, {10, 0, 40}};
  EXPECT_EQ(f.validate(), std::nullopt);
}

TEST(PlanValidator, EmptyPlanPasses) {
  Fixture f = basic();
  EXPECT_EQ(f.validate(), std::nullopt);
}

TEST(PlanValidator, UnknownRequestInSlice) {
  Fixture f = basic();
  f.slices = {{1, 100, 1}, {999, 0, 4}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("slice #1 names unknown request 999"));
}

TEST(PlanValidator, UnknownPreemption) {
  Fixture f = basic();
  f.preempted = {999};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("preemption #0 names unknown request 999"));
}

TEST(PlanValidator, PreemptingAWaitingRequest) {
  Fixture f = basic();
  f.preempted = {10};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("request 10 which is not running"));
}

TEST(PlanValidator, DuplicateSlice) {
  Fixture f = basic();
  f.slices = {{2, 64, 10}, {1, 100, 1}, {2, 64, 10}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("request 2 appears more than once"));
}

TEST(PlanValidator, DuplicatePreemption) {
  Fixture f = basic();
  f.preempted = {2, 2};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("request 2 appears more than once"));
}

TEST(PlanValidator, SliceAndPreemptionOfTheSameRequest) {
  Fixture f = basic();
  f.preempted = {2};
  f.slices = {{2, 64, 10}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("request 2 appears more than once"));
}

TEST(PlanValidator, ZeroTokens) {
  Fixture f = basic();
  f.slices = {{10, 0, 0}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("slice #0 (request 10) has zero tokens"));
}

TEST(PlanValidator, StartDifferentFromComputed) {
  Fixture f = basic();
  f.slices = {{2, 60, 8}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("starts at 60 but the request has 64 computed tokens"));
}

TEST(PlanValidator, MoreTokensThanLeft) {
  Fixture f = basic();
  f.slices = {{1, 100, 2}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("(request 1) takes 2 tokens but only 1 are left"));

  f.slices = {{10, 0, 41}};
  error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("(request 10) takes 41 tokens but only 40 are left"));
}

TEST(PlanValidator, BeyondMaxModelLen) {
  Fixture f = basic();
  f.max_model_len = 200;
  f.slices = {{2, 64, 150}};  // 214 > 200, although the request has 236 tokens left
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("reaches position 214 beyond max_model_len 200"));
  f.slices = {{2, 64, 136}};  // exactly max_model_len is fine
  EXPECT_EQ(f.validate(), std::nullopt);
}

TEST(PlanValidator, OverBudget) {
  Fixture f = basic();
  f.limits.max_num_batched_tokens = 140;
  f.slices = {{1, 100, 1}, {2, 64, 100}, {10, 0, 40}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("plan schedules 141 tokens, over the budget of 140"));
  f.limits.max_num_batched_tokens = 141;
  EXPECT_EQ(f.validate(), std::nullopt);
}

TEST(PlanValidator, MaxNumSeqsCountsAdmissionsAndPreemptionsFreeRoom) {
  Fixture f = basic();
  f.limits.max_num_seqs = 2;  // two running already
  f.slices = {{10, 0, 40}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("plan leaves 3 requests running, over max_num_seqs 2"));

  // Running requests without a slice still count: with no slice at all the plan is fine.
  f.slices.clear();
  EXPECT_EQ(f.validate(), std::nullopt);

  // Preempting one running request makes room for the admission.
  f.slices = {{10, 0, 40}};
  f.preempted = {2};
  EXPECT_EQ(f.validate(), std::nullopt);
}

TEST(PlanValidator, KvBlocksBeyondFreeUntilAPreemptionReleasesEnough) {
  Fixture f = basic();
  // Request 2 at 64 computed holds 4 blocks; 100 more tokens need ceil(164/16) = 11: 7 new.
  // Request 10 needs 3. Together 10.
  f.kv_free = 9;
  f.slices = {{2, 64, 100}, {10, 0, 40}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("plan needs 10 new KV blocks but only 9 are free"));

  f.kv_free = 10;
  EXPECT_EQ(f.validate(), std::nullopt);

  // Preempting request 1 (7 blocks) releases enough even with 3 free.
  f.kv_free = 3;
  f.preempted = {1};
  EXPECT_EQ(f.validate(), std::nullopt);
  f.kv_free = 2;
  error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("only 2 are free (9 after preemptions)"));
}

TEST(PlanValidator, PreemptingARequestFreesOnlyTheBlocksNoOtherRequestHolds) {
  Fixture f = basic();
  f.slices = {{2, 64, 100}, {10, 0, 40}};  // 10 new blocks, as above
  f.preempted = {1};                       // holds 7 blocks
  f.kv_free = 3;
  EXPECT_EQ(f.validate(), std::nullopt);
  // Two of its 7 blocks are a cached beginning another request holds too: they stay held.
  f.running[0].blocks_shared = 2;
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("only 3 are free (8 after preemptions)"));
  f.kv_free = 5;
  EXPECT_EQ(f.validate(), std::nullopt);
}

TEST(PlanValidator, KvBlocksWithinTheLastHeldBlockNeedNothing) {
  Fixture f;
  f.running.push_back(running_request(5, 40, 17));  // 2 blocks held, room up to 32
  f.kv_free = 0;
  f.slices = {{5, 17, 15}};
  EXPECT_EQ(f.validate(), std::nullopt);
  f.slices = {{5, 17, 16}};  // position 33 needs a third block
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("needs 1 new KV blocks"));
}

TEST(PlanValidator, CountsBeyondCapacityAreRejected) {
  Fixture f = basic();
  f.slices = {{1, 100, 1}, {2, 64, 1}, {10, 0, 1}, {1, 100, 1}};  // capacity is 3
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("beyond its arrays' capacity"));

  f.slices = {{1, 100, 1}};
  error = f.validate(/*slice_count=*/7);
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("plan claims 7 slices"));
}

TEST(PlanValidator, FindsWaitingRequestsDeepInALongQueue) {
  Fixture f;
  f.limits.max_num_seqs = 1000;
  f.limits.max_num_batched_tokens = 100000;
  f.kv_free = 10000;
  f.running.push_back(running_request(1, 101, 100));
  // 200 waiting requests whose ids are not in queue order, with distinct prompt lengths.
  for (uint32_t i = 0; i < 200; ++i) f.waiting.push_back(waiting_request(5000 - i * 3, 10 + i));

  const hw_request_view deep = f.waiting[150];  // id 4550, 160 tokens
  f.slices = {{deep.id, 0, deep.total_tokens}};
  EXPECT_EQ(f.validate(), std::nullopt);

  // The validator must look at the deep request itself, not a neighbour.
  f.slices = {{deep.id, 0, deep.total_tokens + 1}};
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("(request 4550) takes 161 tokens but only 160 are left"));

  // Shallow and deep admissions in one plan; the last entry of the queue too.
  f.slices = {{f.waiting[0].id, 0, 5}, {deep.id, 0, 7}, {f.waiting[199].id, 0, 9}};
  EXPECT_EQ(f.validate(), std::nullopt);

  // Unknown ids are still unknown once the queue is indexed.
  f.slices = {{deep.id, 0, 7}, {4999, 0, 1}};
  error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("slice #1 names unknown request 4999"));

  // A deep waiting request cannot be preempted.
  f.slices.clear();
  f.preempted = {deep.id};
  error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("request 4550 which is not running"));

  // Deep admissions count towards max_num_seqs.
  f.preempted.clear();
  f.limits.max_num_seqs = 2;
  f.slices = {{f.waiting[100].id, 0, 1}, {deep.id, 0, 1}};
  error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("plan leaves 3 requests running"));
}

TEST(PlanValidator, ReusedValidatorDoesNotKeepTheLastQueue) {
  Fixture f;
  f.limits.max_num_seqs = 1000;
  for (uint32_t i = 0; i < 100; ++i) f.waiting.push_back(waiting_request(100 + i, 8));
  f.slices = {{190, 0, 8}};  // deep: indexes the queue
  EXPECT_EQ(f.validate(), std::nullopt);

  // Same validator, a new and different long queue: 190 is gone, so it must be unknown.
  f.waiting.clear();
  for (uint32_t i = 0; i < 100; ++i) f.waiting.push_back(waiting_request(1000 + i, 8));
  auto error = f.validate();
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("unknown request 190"));
  f.slices = {{1090, 0, 8}};
  EXPECT_EQ(f.validate(), std::nullopt);
}

}  // namespace
}  // namespace headway::core
