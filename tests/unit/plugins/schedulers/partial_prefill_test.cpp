// The partial-prefill scheduler (vLLM V0's concurrent partial prefills), loaded as a plugin and
// driven step by step on hand-built queues. Every expected plan below is worked out by hand from
// the rules in partial_prefill_scheduler.cpp's header comment (the comments show the arithmetic);
// every plan is also checked by core::PlanValidator.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../../test_support/captured_log.h"
#include "../../test_support/scheduler_harness.h"

namespace headway::test {
namespace {

constexpr uint32_t kBlock = 16;
const char* const kPartial = HEADWAY_PLUGIN_DIR "/headway_scheduler_partial_prefill.so";
const char* const kChunked = HEADWAY_PLUGIN_DIR "/headway_scheduler_chunked.so";

using Slices = std::vector<hw_slice>;
using Ids = std::vector<uint64_t>;

Plan plan_step(SchedulerHarness& h, const std::vector<hw_request_view>& running,
               const std::vector<hw_request_view>& waiting, uint32_t kv_free) {
  Plan p = h.schedule(running, waiting, kv_free);
  EXPECT_FALSE(p.invalid.has_value()) << "invalid plan: " << p.invalid.value_or("");
  return p;
}

Plan plan_step(SchedulerHarness& h, SchedulerQueues& q) {
  return plan_step(h, q.running, q.waiting, q.kv_blocks_free);
}

SchedulerQueues queues(uint32_t kv_free) {
  SchedulerQueues q;
  q.block_size = kBlock;
  q.kv_blocks_free = kv_free;
  return q;
}

hw_request_view with_priority(hw_request_view r, int32_t priority, double arrival) {
  r.priority = priority;
  r.arrival_time = arrival;
  return r;
}

// A request whose KV moved here (scheduler_harness.h), in blocks of kBlock.
hw_request_view moved_request(uint64_t id, uint32_t prompt) {
  return headway::test::moved_request(id, prompt, kBlock);
}

TEST(PartialPrefillScheduler, LimitsComeFromTheOptions) {
  SchedulerHarness h(kPartial, "max_num_batched_tokens = 512\nmax_num_seqs = 3");
  EXPECT_EQ(h.limits().max_num_batched_tokens, 512u);
  EXPECT_EQ(h.limits().max_num_seqs, 3u);

  SchedulerHarness defaults(kPartial, "");
  EXPECT_EQ(defaults.limits().max_num_batched_tokens, 8192u);
  EXPECT_EQ(defaults.limits().max_num_seqs, 256u);

  EXPECT_THROW(SchedulerHarness(kPartial, "policy = \"lifo\""), core::Error);
  EXPECT_THROW(SchedulerHarness(kPartial, "max_num_partial_prefills = 0"), core::Error);
  EXPECT_NO_THROW(
      SchedulerHarness(kPartial, "max_num_partial_prefills = 3\nmax_long_partial_prefills = 3"));
}

TEST(PartialPrefillScheduler, MoreLongThanPartialPrefillsIsRejectedNamingBoth) {
  try {
    SchedulerHarness h(kPartial, "max_num_partial_prefills = 2\nmax_long_partial_prefills = 3");
    FAIL() << "L = 3 > P = 2 was accepted";
  } catch (const core::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("max_long_partial_prefills (3)"), std::string::npos) << message;
    EXPECT_NE(message.find("max_num_partial_prefills (2)"), std::string::npos) << message;
  }
  // The defaults (P = 1, L = 1) are consistent; L = 2 with P left at 1 is not.
  EXPECT_THROW(SchedulerHarness(kPartial, "max_long_partial_prefills = 2"), core::Error);
}

TEST(PartialPrefillScheduler, EmptyQueuesGiveAnEmptyPlan) {
  SchedulerHarness h(kPartial, "max_num_batched_tokens = 512\nmax_num_partial_prefills = 4");
  Plan p = plan_step(h, {}, {}, 100);
  EXPECT_TRUE(p.slices.empty());
  EXPECT_TRUE(p.preempted.empty());
}

// The example: budget 2048, P 4, L 1, T 1000; a 10000-token prompt, then three of 50.
TEST(PartialPrefillScheduler, ShortPromptsOvertakeALongOne) {
  SchedulerHarness h(kPartial,
                     "max_num_batched_tokens = 2048\nmax_num_partial_prefills = 4\n"
                     "max_long_partial_prefills = 1\nlong_prefill_token_threshold = 1000");
  SchedulerQueues q = queues(100000);
  q.waiting = {waiting_request(1, 10000, 2), waiting_request(2, 50, 2), waiting_request(3, 50, 2),
               waiting_request(4, 50, 2)};

  // Counted: 1 (long, the first long one), 2, 3, 4: four prefills, share 2048 / 4 = 512. Request 1
  // gets a 512 chunk, the short ones their whole 50 in the same step.
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 512}, {2, 0, 50}, {3, 0, 50}, {4, 0, 50}}));
  EXPECT_TRUE(p.preempted.empty());
  q.apply(p);

  // 2, 3, 4 decode first; request 1 is the only prefill counted: share 2048, and it gets what the
  // decodes left, 2045 of its 9488.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{2, 50, 1}, {3, 50, 1}, {4, 50, 1}, {1, 512, 2045}}));
  q.apply(p);
  EXPECT_EQ(q.finished.size(), 3u);

  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 2557, 2048}}));

  // The baseline on the same queue: the short prompts wait for the long one (see
  // ChunkedScheduler.ReproducesHeadOfLineBlocking).
  SchedulerHarness chunked(kChunked, "max_num_batched_tokens = 2048");
  p = plan_step(chunked, {}, {waiting_request(1, 10000), waiting_request(2, 50)}, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 2048}}));
}

// With P > 1 a prompt is admitted only when KV blocks for all of it are free, after what the
// prefills in progress will still claim (V0 reserved a prompt's blocks at admission). Without this,
// several concurrent prefills would run the cache dry mid-prompt and preempt long prompts.
TEST(PartialPrefillScheduler, AdmitsAPromptOnlyWhenItsWholeKvFits) {
  const char* options =
      "max_num_batched_tokens = 2048\nmax_num_partial_prefills = 4\n"
      "max_long_partial_prefills = 2\nlong_prefill_token_threshold = 1000";
  // Running 1: 4000-token prompt, 512 computed (32 blocks of 16), will claim 250 - 32 = 218
  // blocks. Waiting 2: 3200 tokens, 200 blocks: admitted when 200 + 218 <= free, i.e. when 418
  // blocks are free. Then counted: 1 (long) and 2 (long, L = 2 allows it): share 2048 / 2 = 1024.
  // Request 1 takes 1024 tokens: 1536 computed = 96 blocks, 64 new, and will still claim 154;
  // request 2's chunk of 1024 takes 64 blocks, and 200 + 154 fit in the 418 - 64 left.
  const std::vector<hw_request_view> running = {prefilling_request(1, 4000, 512, 0, kBlock)};
  const std::vector<hw_request_view> waiting = {waiting_request(2, 3200)};

  SchedulerHarness h(kPartial, options);
  // With 417, request 2 waits and is not counted: request 1 alone takes the whole budget.
  Plan p = plan_step(h, running, waiting, 417);
  EXPECT_EQ(p.slices, (Slices{{1, 512, 2048}}));
  p = plan_step(h, running, waiting, 418);
  EXPECT_EQ(p.slices, (Slices{{1, 512, 1024}, {2, 0, 1024}}));

  // P = 1 keeps the baseline's rule (the chunk must fit): 64 + 64 blocks are enough there.
  SchedulerHarness one(kPartial, "max_num_batched_tokens = 2048");
  p = plan_step(one, running, waiting, 128);
  EXPECT_EQ(p.slices, (Slices{{1, 512, 2048}}));  // the whole budget goes to the running prefill
}

// L = 1: a second long prompt is deferred while the first is in progress; a short one behind it is
// still admitted; once the first's remaining drops to T it is no longer long and the second starts.
TEST(PartialPrefillScheduler, LongLimitDefersTheSecondLongPromptUntilTheFirstIsShort) {
  SchedulerHarness h(kPartial,
                     "max_num_batched_tokens = 1000\nmax_num_partial_prefills = 2\n"
                     "max_long_partial_prefills = 1\nlong_prefill_token_threshold = 500");
  SchedulerQueues q = queues(100000);
  q.waiting = {waiting_request(1, 1400, 1), waiting_request(2, 2000, 1),
               waiting_request(3, 100, 1)};

  // Counted: 1 (long), 2 skipped (a second long one), 3: two prefills, share 500. Request 2 is
  // deferred, request 3 overtakes it. 400 tokens of budget stay unused, as in V0.
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 500}, {3, 0, 100}}));
  q.apply(p);
  ASSERT_EQ(q.waiting.size(), 1u);
  EXPECT_EQ(q.waiting[0].id, 2u);

  // A short prompt arrives. Counted: 1 (900 left, long), 2 skipped, 4: share 500. Request 1 takes
  // 500; request 2 is still deferred (one long prefill in progress); 4 is admitted.
  q.waiting.push_back(waiting_request(4, 100, 1));
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 500, 500}, {4, 0, 100}}));
  q.apply(p);

  // Request 1 has 400 left <= T: no longer long. Counted: 1, then 2 (long, the only one): share
  // 500. Request 1 finishes its prompt with 400; request 2 starts beside it with 500.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 1000, 400}, {2, 0, 500}}));
  q.apply(p);

  // Request 2 alone: share 1000.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{2, 500, 1000}}));
  q.apply(p);
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{2, 1500, 500}}));
  q.apply(p);
  EXPECT_TRUE(q.empty());
}

// C (max_long_prefill_chunk) caps every chunk of a long prompt (more than T tokens in all),
// running or admitted, to its last, and no chunk of a short one; the budget it leaves goes to
// whoever comes next. The last T tokens are capped too: they are the chunks deepest in the
// context, the slowest steps a long prompt is in (helper-170 found them uncapped, taking the whole
// budget at a 120k context).
TEST(PartialPrefillScheduler, LongPrefillChunkCapsEveryChunkOfALongPrompt) {
  SchedulerHarness h(kPartial,
                     "max_num_batched_tokens = 2048\nmax_num_partial_prefills = 4\n"
                     "max_long_partial_prefills = 1\nlong_prefill_token_threshold = 1000\n"
                     "max_long_prefill_chunk = 256");
  SchedulerQueues q = queues(100000);
  q.waiting = {waiting_request(1, 3000, 1), waiting_request(2, 900, 2)};

  // Counted: 1 (long), 2 (900 <= T: short): share 1024. Request 1 takes 256 (C), request 2 its
  // whole 900 (short prompts are not capped).
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 256}, {2, 0, 900}}));
  q.apply(p);

  // 2 decodes its last token; 1 (2744 left, long) is the only prefill counted: share 2048,
  // capped at 256.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{2, 900, 1}, {1, 256, 256}}));
  q.apply(p);

  // Alone, request 1 takes 256 a step to the end of its prompt, with T tokens or fewer left too.
  uint32_t computed = 512;
  while (computed < 3000) {
    const uint32_t chunk = std::min(256u, 3000 - computed);
    p = plan_step(h, q);
    ASSERT_EQ(p.slices, (Slices{{1, computed, chunk}})) << computed << " computed";
    q.apply(p);
    computed += chunk;
  }

  // Without C, the same first step gives request 1 its whole share.
  SchedulerHarness uncapped(kPartial,
                            "max_num_batched_tokens = 2048\nmax_num_partial_prefills = 4\n"
                            "max_long_partial_prefills = 1\nlong_prefill_token_threshold = 1000");
  p = plan_step(uncapped, {}, {waiting_request(1, 3000, 1), waiting_request(2, 900, 1)}, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 1024}, {2, 0, 900}}));
}

// With P = 1 the threshold already caps every chunk (chunked's meaning), so C would do nothing:
// the combination is refused, naming both options.
TEST(PartialPrefillScheduler, LongPrefillChunkWithOnePartialPrefillIsRejected) {
  try {
    SchedulerHarness h(kPartial, "max_long_prefill_chunk = 512");
    FAIL() << "C with P = 1 was accepted";
  } catch (const core::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("max_long_prefill_chunk (512)"), std::string::npos) << message;
    EXPECT_NE(message.find("max_num_partial_prefills > 1"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(
      SchedulerHarness(kPartial, "max_num_partial_prefills = 2\nmax_long_prefill_chunk = 512"));
}

// A budget smaller than P gave each of P prefills budget / P = 0 tokens: the first step's plan had
// a slice of 0 tokens (the engine refused it). A share is at least 1 token, so as many prefills as
// the budget holds progress; a warning names both options. (Not refused: the conformance suite
// runs every option set with budgets down to 1.)
TEST(PartialPrefillScheduler, ABudgetBelowThePartialPrefillsGivesEachOneToken) {
  test::CapturedLog log;
  SchedulerHarness h(kPartial, "max_num_batched_tokens = 3\nmax_num_partial_prefills = 4");
  EXPECT_NE(log.text().find("max_num_partial_prefills (4) > max_num_batched_tokens (3)"),
            std::string::npos)
      << log.text();
  const auto p = plan_step(h, {},
                           {waiting_request(1, 50, 1), waiting_request(2, 50, 1),
                            waiting_request(3, 50, 1), waiting_request(4, 50, 1)},
                           100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 1}, {2, 0, 1}, {3, 0, 1}}));
}

// With P > 1, a threshold above max_model_len makes no prompt long and L inert: warned about
// (vLLM's SchedulerConfig refuses it); with P = 1 it is a chunk cap, which may exceed any prompt.
TEST(PartialPrefillScheduler, AThresholdAboveMaxModelLenIsWarnedAboutWithPartialPrefills) {
  const auto harness = [](uint32_t partial) {
    SchedulerHarness(kPartial,
                     "max_num_partial_prefills = " + std::to_string(partial) +
                         "\nlong_prefill_token_threshold = 200000",
                     /*block_size=*/16, /*kv_blocks_total=*/4096, /*max_model_len=*/131072);
  };
  test::CapturedLog log;
  harness(1);
  EXPECT_EQ(log.text().find("long_prefill_token_threshold"), std::string::npos) << log.text();
  harness(4);
  EXPECT_NE(log.text().find("long_prefill_token_threshold (200000) > the engine's max_model_len "
                            "(131072): no prompt counts as long"),
            std::string::npos)
      << log.text();
}

// A C of the whole budget or more never caps a chunk: accepted (it is harmless), with a warning
// that names both options; a C below the budget is not warned about.
TEST(PartialPrefillScheduler, LongPrefillChunkAtOrAboveTheBudgetIsWarnedAbout) {
  test::CapturedLog log;
  const auto harness = [](uint32_t chunk) {
    SchedulerHarness(kPartial,
                     "max_num_partial_prefills = 2\nmax_num_batched_tokens = 512\n"
                     "max_long_prefill_chunk = " +
                         std::to_string(chunk));
  };
  harness(511);
  const std::string below = log.text();
  harness(512);
  EXPECT_EQ(below.find("never caps"), std::string::npos) << below;
  EXPECT_NE(log.text().find("max_long_prefill_chunk (512) >= max_num_batched_tokens (512): it "
                            "never caps a chunk"),
            std::string::npos)
      << log.text();
}

// L = 2 admits two long prompts side by side; a third long one waits.
TEST(PartialPrefillScheduler, LongLimitOfTwoAdmitsTwoLongPrompts) {
  SchedulerHarness h(kPartial,
                     "max_num_batched_tokens = 900\nmax_num_partial_prefills = 3\n"
                     "max_long_partial_prefills = 2\nlong_prefill_token_threshold = 100");
  // Counted: 1, 2 (long), 3 skipped (long, two counted), 4 (short): three, share 300.
  Plan p = plan_step(h, {},
                     {waiting_request(1, 1000), waiting_request(2, 1000), waiting_request(3, 1000),
                      waiting_request(4, 50)},
                     100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 300}, {2, 0, 300}, {4, 0, 50}}));

  // A long prefill already running counts against L: one running long + one admitted = 2.
  p = plan_step(h, {prefilling_request(1, 1000, 300, 0, kBlock)},
                {waiting_request(2, 1000), waiting_request(3, 1000)}, 100000);
  // Counted: 1 (running, long), 2 (long); 3 skipped: share 450.
  EXPECT_EQ(p.slices, (Slices{{1, 300, 450}, {2, 0, 450}}));
}

TEST(PartialPrefillScheduler, BudgetIsSplitByTheCountOfPrefillsUpToP) {
  const std::string options =
      "max_num_batched_tokens = 1000\nmax_num_partial_prefills = 4\n"
      "long_prefill_token_threshold = 10000";
  SchedulerHarness h(kPartial, options);

  // Two counted (fewer than P): 1000 / 2.
  Plan p = plan_step(h, {}, {waiting_request(1, 900), waiting_request(2, 900)}, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 500}, {2, 0, 500}}));

  // Five waiting, counting stops at P = 4: 1000 / 4 = 250; the budget is gone before the fifth.
  p = plan_step(h, {},
                {waiting_request(1, 900), waiting_request(2, 900), waiting_request(3, 900),
                 waiting_request(4, 900), waiting_request(5, 900)},
                100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 250}, {2, 0, 250}, {3, 0, 250}, {4, 0, 250}}));

  // Running prefills count: 2 running + 1 waiting = 3, 1000 / 3 = 333 (floor).
  p = plan_step(
      h, {prefilling_request(1, 1000, 100, 0, kBlock), prefilling_request(2, 1000, 100, 1, kBlock)},
      {waiting_request(3, 900)}, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 100, 333}, {2, 100, 333}, {3, 0, 333}}));

  // Only decodes and nothing waiting: no prefill counted, and decodes take one token each.
  p = plan_step(h, {decoding_request(1, 20, 1, 0, kBlock), decoding_request(2, 20, 3, 1, kBlock)},
                {}, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 20, 1}, {2, 22, 1}}));

  // A single prefill is counted alone: it may take the whole budget.
  p = plan_step(h, {decoding_request(1, 20, 1, 0, kBlock)}, {waiting_request(2, 5000)}, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 20, 1}, {2, 0, 999}}));
}

// Only the prefills that run share the budget: a waiting prompt this step cannot admit (no seat
// left under max_num_seqs, no KV for all of it, or behind one that has none) takes no share, nor
// does a request holding moved KV, which is a decode. vLLM V0 counts them all up to P, and leaves
// their shares unused.
TEST(PartialPrefillScheduler, OnlyPrefillsThatCanRunShareTheBudget) {
  const std::string options =
      "max_num_batched_tokens = 2048\nmax_num_partial_prefills = 4\n"
      "long_prefill_token_threshold = 10000";
  const std::vector<hw_request_view> four = {waiting_request(1, 8000), waiting_request(2, 8000),
                                             waiting_request(3, 8000), waiting_request(4, 8000)};
  const hw_request_view running = prefilling_request(1, 8000, 2048, 0, kBlock);  // 128 blocks

  // max_num_seqs = 1: one seat, one prefill counted, the whole budget (V0: 2048 / 4 = 512).
  SchedulerHarness one_seat(kPartial, options + "\nmax_num_seqs = 1");
  Plan p = plan_step(one_seat, {}, four, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 2048}}));
  // Request 1 runs; no seat for the others.
  p = plan_step(one_seat, {running}, {four[1], four[2], four[3]}, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 2048, 2048}}));

  SchedulerHarness h(kPartial, options);
  // KV for one whole prompt (500 blocks), not two: one counted.
  p = plan_step(h, {}, four, 600);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 2048}}));

  // Request 1 will claim 500 - 128 = 372 of 400 free blocks: 28 left, prompt 2 needs 500 and
  // prompt 3 (7) may not overtake it. Request 1 alone is counted.
  const std::vector<hw_request_view> waiting = {waiting_request(2, 8000), waiting_request(3, 100)};
  p = plan_step(h, {running}, waiting, 400);
  EXPECT_EQ(p.slices, (Slices{{1, 2048, 2048}}));
  // With room for both, all three are counted: 2048 / 3 = 682.
  p = plan_step(h, {running}, waiting, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 2048, 682}, {2, 0, 682}, {3, 0, 100}}));

  // A request holding moved KV is a decode: not counted, and its token is kept from the prefill.
  p = plan_step(h, {running}, {moved_request(2, 300)}, 1000);
  EXPECT_EQ(p.slices, (Slices{{1, 2048, 2047}, {2, 300, 1}}));
}

// A waiting request whose KV moved here with blocks for all of it takes no free block now or
// later, so what the prefills in progress will claim cannot hold it back: it was, whenever that
// exceeded the free blocks, though the comment in step 3 said it passes.
TEST(PartialPrefillScheduler, RequestHoldingMovedKvPassesTheBlocksPrefillsWillClaim) {
  SchedulerHarness h(kPartial, "max_num_batched_tokens = 256\nmax_num_partial_prefills = 2");
  // Request 1: 1,000 tokens, 200 computed (13 blocks). Counted alone (2 is a decode): share 256,
  // less the token kept for 2. It takes 255: 455 computed, 29 blocks, 16 new; 4 left free, and
  // it will still claim 63 - 29 = 34. Request 2 needs no block: admitted.
  const Plan p =
      plan_step(h, {prefilling_request(1, 1000, 200, 0, kBlock)}, {moved_request(2, 300)}, 20);
  EXPECT_EQ(p.slices, (Slices{{1, 200, 255}, {2, 300, 1}}));
}

// P above max_num_seqs is accepted, with a warning: no more prefills than requests run at once.
TEST(PartialPrefillScheduler, MorePartialPrefillsThanMaxNumSeqsIsWarnedAbout) {
  test::CapturedLog log;
  SchedulerHarness(kPartial, "max_num_partial_prefills = 4\nmax_num_seqs = 4");
  EXPECT_EQ(log.text().find("> max_num_seqs"), std::string::npos) << log.text();
  SchedulerHarness(kPartial, "max_num_partial_prefills = 8\nmax_num_seqs = 4");
  EXPECT_NE(log.text().find("max_num_partial_prefills (8) > max_num_seqs (4): at most that many "
                            "prefills share the budget"),
            std::string::npos)
      << log.text();
}

// A budget below max_num_seqs is accepted (vLLM refuses it), with a warning naming both: a step
// serves at most `budget` requests, and the decodes past them wait.
TEST(PartialPrefillScheduler, ABudgetBelowMaxNumSeqsIsWarnedAbout) {
  test::CapturedLog log;
  SchedulerHarness(kPartial, "max_num_batched_tokens = 64\nmax_num_seqs = 64");
  EXPECT_EQ(log.text().find("< max_num_seqs"), std::string::npos) << log.text();
  SchedulerHarness(kPartial, "max_num_batched_tokens = 63\nmax_num_seqs = 64");
  EXPECT_NE(log.text().find("partial_prefill: max_num_batched_tokens (63) < max_num_seqs (64)"),
            std::string::npos)
      << log.text();
}

// P divides the budget; it does not cap how many prefills share a step.
TEST(PartialPrefillScheduler, PIsNotAHardCapOnPrefillsPerStep) {
  SchedulerHarness h(kPartial,
                     "max_num_batched_tokens = 1000\nmax_num_partial_prefills = 2\n"
                     "long_prefill_token_threshold = 10000");
  std::vector<hw_request_view> running;
  for (uint64_t id = 1; id <= 5; ++id) {
    running.push_back(prefilling_request(id, 200, 100, id, kBlock));  // 100 left each
  }
  // Five running prefills (count capped at P = 2: share 500) take 100 each; the waiting prompt is
  // admitted too, with min(900, 500 left, 500).
  Plan p = plan_step(h, running, {waiting_request(6, 900)}, 100000);
  EXPECT_EQ(
      p.slices,
      (Slices{
          {1, 100, 100}, {2, 100, 100}, {3, 100, 100}, {4, 100, 100}, {5, 100, 100}, {6, 0, 500}}));
}

TEST(PartialPrefillScheduler, DecodesAreServedBeforeRunningPrefills) {
  SchedulerHarness h(kPartial,
                     "max_num_batched_tokens = 300\nmax_num_partial_prefills = 2\n"
                     "long_prefill_token_threshold = 10000");
  const std::vector<hw_request_view> running = {
      decoding_request(10, 100, 3, 0, kBlock),      // computed 102 of 103
      prefilling_request(11, 500, 100, 1, kBlock),  // 400 left
      decoding_request(12, 50, 1, 2, kBlock),       // computed 50 of 51
  };
  // Counted: 11, 13: share 150. Decodes 10 and 12 first, then 11 (150), then 13 with the 148 left.
  Plan p = plan_step(h, running, {waiting_request(13, 200)}, 1000);
  EXPECT_EQ(p.slices, (Slices{{10, 102, 1}, {12, 50, 1}, {11, 100, 150}, {13, 0, 148}}));

  // The baseline (and P = 1) serves admission order: the prefill takes the later decode's budget.
  SchedulerHarness one(kPartial, "max_num_batched_tokens = 300");
  p = plan_step(one, running, {waiting_request(13, 200)}, 1000);
  EXPECT_EQ(p.slices, (Slices{{10, 102, 1}, {11, 100, 299}}));

  // The order does not depend on how the snapshot lists them: by (prefill?, admission order).
  p = plan_step(
      h,
      {prefilling_request(20, 500, 100, 5, kBlock), prefilling_request(21, 500, 100, 3, kBlock),
       decoding_request(22, 50, 1, 4, kBlock)},
      {}, 1000);
  // Counted: 20, 21: share 150. Decode 22, then 21 (admitted 3rd), then 20 with 149 left.
  EXPECT_EQ(p.slices, (Slices{{22, 50, 1}, {21, 100, 150}, {20, 100, 149}}));

  // A budget of 2 stops after two decodes: the third decode and the prefill get nothing.
  SchedulerHarness tiny(kPartial,
                        "max_num_batched_tokens = 2\nmax_num_partial_prefills = 2\n"
                        "long_prefill_token_threshold = 10000");
  p = plan_step(tiny,
                {prefilling_request(1, 500, 100, 0, kBlock), decoding_request(2, 20, 1, 1, kBlock),
                 decoding_request(3, 20, 1, 2, kBlock), decoding_request(4, 20, 1, 3, kBlock)},
                {waiting_request(5, 10)}, 1000);
  EXPECT_EQ(p.slices, (Slices{{2, 20, 1}, {3, 20, 1}}));
}

// P > 1 and T = 0: T becomes 4% of max_model_len.
TEST(PartialPrefillScheduler, ThresholdDefaultsToFourPercentOfMaxModelLen) {
  const std::string options =
      "max_num_batched_tokens = 2000\nmax_num_partial_prefills = 2\nmax_long_partial_prefills = 1";
  const std::vector<hw_request_view> waiting = {waiting_request(1, 401), waiting_request(2, 401),
                                                waiting_request(3, 400)};
  // max_model_len 10000: T = 400. 1 is long, 2 (long) is deferred, 3 (400, not > 400) is short.
  // Counted: 1, 3: share 1000.
  SchedulerHarness h10k(kPartial, options, kBlock, 1u << 20, 10000);
  Plan p = plan_step(h10k, {}, waiting, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 401}, {3, 0, 400}}));

  // max_model_len 100000: T = 4000, all three are short.
  SchedulerHarness h100k(kPartial, options, kBlock, 1u << 20, 100000);
  p = plan_step(h100k, {}, waiting, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 401}, {2, 0, 401}, {3, 0, 400}}));

  // An explicit T is kept: T = 100 makes all three long, so only the first is admitted (and it is
  // the only one counted: share 2000).
  SchedulerHarness explicit_t(kPartial, options + "\nlong_prefill_token_threshold = 100", kBlock,
                              1u << 20, 10000);
  p = plan_step(explicit_t, {}, waiting, 100000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 401}}));
}

TEST(PartialPrefillScheduler, PriorityPolicyOrdersWaitingAndRunning) {
  const std::string options =
      "max_num_batched_tokens = 250\nmax_num_partial_prefills = 2\n"
      "long_prefill_token_threshold = 1000\npolicy = \"priority\"";
  SchedulerHarness h(kPartial, options);
  const std::vector<hw_request_view> waiting = {
      with_priority(waiting_request(1, 100), 5, 0.0),
      with_priority(waiting_request(2, 100), 0, 2.0),
      with_priority(waiting_request(3, 100), 0, 1.0),
      with_priority(waiting_request(4, 100), 1, 0.0),
  };
  // By (priority, arrival): 3, 2, 4, 1. Counted: 3, 2: share 125. 3 and 2 take 100 each, 4 the 50
  // left; 1 gets nothing.
  Plan p = plan_step(h, {}, waiting, 1000);
  EXPECT_EQ(p.slices, (Slices{{3, 0, 100}, {2, 0, 100}, {4, 0, 50}}));

  // fcfs ignores priorities: queue order.
  SchedulerHarness fcfs(kPartial,
                        "max_num_batched_tokens = 250\nmax_num_partial_prefills = 2\n"
                        "long_prefill_token_threshold = 1000");
  p = plan_step(fcfs, {}, waiting, 1000);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 100}, {2, 0, 100}, {3, 0, 50}}));

  // Running: decodes first, each group by (priority, arrival). Counted: 12, 13: share 125.
  const std::vector<hw_request_view> running = {
      with_priority(decoding_request(10, 20, 1, 0, kBlock), 2, 0.0),
      with_priority(decoding_request(11, 20, 1, 1, kBlock), 0, 1.0),
      with_priority(prefilling_request(12, 500, 100, 2, kBlock), 0, 2.0),
      with_priority(prefilling_request(13, 500, 100, 3, kBlock), -1, 3.0),
  };
  p = plan_step(h, running, {}, 1000);
  EXPECT_EQ(p.slices, (Slices{{11, 20, 1}, {10, 20, 1}, {13, 100, 125}, {12, 100, 123}}));
}

// A more urgent prompt that waits for free KV blocks does not hold back a less urgent request
// whose KV was moved here: that one holds blocks for all it will compute (and frees them when it
// finishes), so it goes first. Holding it back stalled a decode engine with nothing running
// (conformance's moved_kv traces: "plans nothing with 0 running and 10 waiting").
TEST(PartialPrefillScheduler, PriorityServesRequestsHoldingMovedKvFirst) {
  for (uint32_t max_partial : {1u, 4u}) {
    SchedulerHarness h(kPartial, "policy = \"priority\"\nmax_num_partial_prefills = " +
                                     std::to_string(max_partial));
    SCOPED_TRACE("P " + std::to_string(max_partial));
    // 10 blocks free; the urgent prompt's first chunk is all of its 1,000 tokens (the budget is
    // 8,192), 63 blocks. The moved requests need no new block for their next token.
    const std::vector<hw_request_view> waiting = {
        with_priority(waiting_request(1, 1000), 0, 0.0),
        with_priority(moved_request(2, 300), 5, 1.0),
        with_priority(moved_request(3, 40), 9, 2.0),
    };
    Plan p = plan_step(h, {}, waiting, 10);
    EXPECT_EQ(p.slices, (Slices{{2, 300, 1}, {3, 40, 1}}));
    // With blocks for it, the urgent prompt comes right after them.
    p = plan_step(h, {}, waiting, 100);
    EXPECT_EQ(p.slices, (Slices{{2, 300, 1}, {3, 40, 1}, {1, 0, 1000}}));
  }
}

// First come, first served: a head that does not fit stops the prompts behind it, not the requests
// whose KV moved here with blocks for all of it. They take no free block, and the blocks they hold
// may be what the head waits for: with nothing running, the engine stalled for ever (helper-134,
// conformance's moved_kv traces with max_num_partial_prefills = 2, max_long_partial_prefills = 1,
// max_long_prefill_chunk = 16).
TEST(PartialPrefillScheduler, RequestsHoldingMovedKvPassAHeadThatDoesNotFit) {
  for (uint32_t max_partial : {1u, 4u}) {
    SchedulerHarness h(kPartial, "max_num_partial_prefills = " + std::to_string(max_partial));
    SCOPED_TRACE("P " + std::to_string(max_partial));
    // The head's 1,000 tokens take 63 blocks; the prompt behind the moved requests takes 2.
    const std::vector<hw_request_view> waiting = {waiting_request(1, 1000), moved_request(2, 300),
                                                  moved_request(3, 40), waiting_request(4, 20)};
    Plan p = plan_step(h, {}, waiting, 10);
    EXPECT_EQ(p.slices, (Slices{{2, 300, 1}, {3, 40, 1}}));
    p = plan_step(h, {}, waiting, 100);
    EXPECT_EQ(p.slices, (Slices{{1, 0, 1000}, {2, 300, 1}, {3, 40, 1}, {4, 0, 20}}));
  }
}

// The priority policy orders both queues without a comparison sort when it can (a counting sort
// over the few distinct priorities, queue_groups.h) and falls back to one when it cannot. Checked
// here against a plain sort of the documented keys (waiting: holds moved KV, priority, arrival), on
// queues built to reach every path: one priority in order, several priorities whose members are
// each in arrival order, arrivals out of order (ties included), running requests not in admission
// order, priorities that share a home slot of the 64-slot table (0, 64, -64), a wide range of
// them, and more distinct ones than the table holds. Budget, KV and the long threshold (at the
// harness's max_model_len: past it, a warning) are out of the way, so that every running request
// gets a slice and every waiting one is admitted: the plan lists them in serving order.
TEST(PartialPrefillScheduler, PriorityOrderIsThatOfAFullSort) {
  enum class Priorities { kOne, kFew, kSharingASlot, kWide, kMoreThanTheTable };
  std::mt19937 rng(7);
  auto pick = [&](uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng); };
  for (uint32_t max_partial : {1u, 4u}) {
    SchedulerHarness h(kPartial,
                       "max_num_batched_tokens = 1000000\nmax_num_seqs = 65536\n"
                       "long_prefill_token_threshold = 1048576\npolicy = \"priority\"\n"
                       "max_num_partial_prefills = " +
                           std::to_string(max_partial));
    for (int trial = 0; trial < 400; ++trial) {
      const auto kind = static_cast<Priorities>(pick(5));
      const bool arrivals_in_order = pick(2) == 0;
      auto priority = [&]() -> int32_t {
        switch (kind) {
          case Priorities::kOne:
            return 3;
          case Priorities::kFew:
            return std::array<int32_t, 4>{-1, 0, 1, 7}[pick(4)];
          case Priorities::kSharingASlot:
            return std::array<int32_t, 3>{0, 64, -64}[pick(3)];
          case Priorities::kWide:
            return static_cast<int32_t>(pick(200)) - 100;
          case Priorities::kMoreThanTheTable:  // distinct, in queues of 65 or more (below)
            return static_cast<int32_t>(pick(1u << 30)) - (1 << 29);
        }
        return 0;
      };
      // Arrivals: increasing along the queue, or drawn from a few values (ties and disorder).
      double clock = 0;
      auto arrival = [&]() {
        clock += 1.0;
        return arrivals_in_order ? clock : static_cast<double>(pick(8));
      };
      std::vector<hw_request_view> running, waiting;
      uint64_t id = 0;
      const uint32_t more = kind == Priorities::kMoreThanTheTable ? 65 : 0;
      for (uint32_t k = 0, n = more + pick(60); k < n; ++k, ++id) {
        const hw_request_view r = pick(3) == 0 ? prefilling_request(id, 64, 16, id, kBlock)
                                               : decoding_request(id, 20, 1, id, kBlock);
        running.push_back(with_priority(r, priority(), arrival()));
      }
      // The ABI lists running requests in admission order; the scheduler does not rely on it.
      if (pick(4) == 0) {
        std::vector<uint64_t> admissions(running.size());
        std::iota(admissions.begin(), admissions.end(), uint64_t{0});
        std::shuffle(admissions.begin(), admissions.end(), rng);
        for (size_t k = 0; k < running.size(); ++k) running[k].admission_order = admissions[k];
      }
      clock = 0;
      // One waiting request in six holds KV moved here, which puts it before the others.
      for (uint32_t k = 0, n = more + pick(80); k < n; ++k, ++id) {
        const hw_request_view w = pick(6) == 0 ? moved_request(id, 10) : waiting_request(id, 10);
        waiting.push_back(with_priority(w, priority(), arrival()));
      }
      SCOPED_TRACE("P " + std::to_string(max_partial) + ", trial " + std::to_string(trial));

      std::vector<uint32_t> run_order(running.size()), wait_order(waiting.size());
      std::iota(run_order.begin(), run_order.end(), 0u);
      std::iota(wait_order.begin(), wait_order.end(), 0u);
      auto run_key = [&](uint32_t i) {
        const hw_request_view& r = running[i];
        const bool prefill = max_partial > 1 && r.state == HW_REQUEST_PREFILLING;
        return std::make_tuple(prefill, r.priority, r.arrival_time, r.admission_order, i);
      };
      std::sort(run_order.begin(), run_order.end(),
                [&](uint32_t a, uint32_t b) { return run_key(a) < run_key(b); });
      auto wait_key = [&](uint32_t i) {
        const hw_request_view& w = waiting[i];
        return std::make_tuple(w.blocks_held == 0, w.priority, w.arrival_time);
      };
      std::stable_sort(wait_order.begin(), wait_order.end(),
                       [&](uint32_t a, uint32_t b) { return wait_key(a) < wait_key(b); });
      Ids expected;
      for (uint32_t i : run_order) expected.push_back(running[i].id);
      for (uint32_t i : wait_order) expected.push_back(waiting[i].id);

      const Plan p = plan_step(h, running, waiting, 1u << 20);
      Ids planned;
      for (const hw_slice& slice : p.slices) planned.push_back(slice.request_id);
      ASSERT_EQ(planned, expected);
    }
  }
}

// fcfs: the victim is the last request in serving order (decodes, then prefills), which need not
// be the most recently admitted; and nobody is admitted in that step.
TEST(PartialPrefillScheduler, FcfsPreemptsTheLastInServingOrderAndAdmitsNobody) {
  SchedulerHarness h(kPartial, "max_num_batched_tokens = 8192\nmax_num_partial_prefills = 2");
  SchedulerQueues q = queues(0);
  q.next_admission = 3;
  q.running = {
      prefilling_request(1, 100, 32, 0, kBlock),  // 2 blocks; a chunk of 68 needs 5 more
      decoding_request(2, 32, 1, 1, kBlock),      // 2 blocks, needs a third
      decoding_request(3, 40, 1, 2, kBlock),      // 3 blocks, needs none
  };
  q.waiting = {waiting_request(4, 10)};

  // Order: 2, 3, 1. Request 2 needs a block: the last in order (1, admitted first) is preempted,
  // freeing 2; 2 takes one. Request 4 would fit in the block and the budget left, but is not
  // admitted in a step that preempted.
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{2, 32, 1}, {3, 40, 1}}));
  EXPECT_EQ(p.preempted, (Ids{1}));
  q.apply(p);
  EXPECT_EQ(q.kv_blocks_free, 1u);
  ASSERT_EQ(q.waiting.size(), 2u);
  EXPECT_EQ(q.waiting[0].id, 1u);  // back at the head, to recompute its 100 tokens
  EXPECT_EQ(q.waiting[0].computed_tokens, 0u);

  // The baseline serves 1 first (admission order): its chunk of 68 needs 5 blocks, so it preempts
  // the most recently admitted ones, 3 then 2.
  SchedulerHarness chunked(kChunked, "max_num_batched_tokens = 8192");
  SchedulerQueues b = queues(0);
  b.running = {prefilling_request(1, 100, 32, 0, kBlock), decoding_request(2, 32, 1, 1, kBlock),
               decoding_request(3, 40, 1, 2, kBlock)};
  p = plan_step(chunked, b);
  EXPECT_EQ(p.preempted, (Ids{3, 2}));
}

// priority: the victim is the lowest-priority running request (highest value, then latest
// arrival), even when it is not last or was served earlier in the step (it gives back its slice);
// a request that is itself the lowest preempts itself and the ones after it are still served.
TEST(PartialPrefillScheduler, PriorityPreemptsTheLowestPriority) {
  SchedulerHarness h(kPartial,
                     "max_num_batched_tokens = 8192\nmax_num_partial_prefills = 2\n"
                     "long_prefill_token_threshold = 1000\npolicy = \"priority\"");
  const std::vector<hw_request_view> running = {
      with_priority(decoding_request(1, 32, 1, 0, kBlock), 0, 0.0),     // 2 blocks, needs a third
      with_priority(decoding_request(2, 40, 1, 1, kBlock), 5, 1.0),     // 3 blocks, needs none
      with_priority(decoding_request(3, 40, 2, 2, kBlock), 1, 2.0),     // 3 blocks, needs none
      with_priority(decoding_request(5, 40, 2, 3, kBlock), 5, 0.5),     // 3 blocks, needs none
      with_priority(prefilling_request(4, 48, 16, 4, kBlock), 0, 3.0),  // 1 block, 32 left: 2 more
  };
  // Order: 1 (p0), 3 (p1), 5 (p5, arrival 0.5), 2 (p5, arrival 1), then prefill 4. Request 1
  // needs a block and none is free: the victim is 2 (priority 5, the later arrival), freeing 3.
  // 1 takes one, 4 takes two. Nobody is admitted.
  Plan p = plan_step(h, running, {waiting_request(6, 5)}, 0);
  EXPECT_EQ(p.slices, (Slices{{1, 32, 1}, {3, 41, 1}, {5, 41, 1}, {4, 16, 32}}));
  EXPECT_EQ(p.preempted, (Ids{2}));

  // fcfs would have preempted the last in order, prefill 4.
  SchedulerHarness fcfs(kPartial,
                        "max_num_batched_tokens = 8192\nmax_num_partial_prefills = 2\n"
                        "long_prefill_token_threshold = 1000");
  p = plan_step(fcfs, running, {waiting_request(6, 5)}, 0);
  EXPECT_EQ(p.preempted, (Ids{4}));

  // Decode 1 (priority 9) needs a block and is itself the lowest priority: it preempts itself,
  // freeing 2, and prefill 2 (priority 0), served after it, still gets its chunk.
  p = plan_step(h,
                {with_priority(decoding_request(1, 32, 1, 0, kBlock), 9, 0.0),
                 with_priority(prefilling_request(2, 48, 16, 1, kBlock), 0, 1.0)},
                {}, 0);
  EXPECT_EQ(p.slices, (Slices{{2, 16, 32}}));
  EXPECT_EQ(p.preempted, (Ids{1}));

  // Decode 1 (priority 9) needs no block and is served first (decodes first); prefill 2
  // (priority 0) then needs two and none is free: the victim is decode 1, already served, which
  // gives back its slice and frees 3, not prefill 2 itself. Only the not-yet-served were victims
  // before, so 2 preempted itself, mostly prefilled, and recomputed after the less urgent decodes
  // ended (helper-170: TTFT 21 s for a priority-0 prompt behind three priority-5 decodes).
  p = plan_step(h,
                {with_priority(decoding_request(1, 40, 1, 0, kBlock), 9, 0.0),
                 with_priority(decoding_request(3, 40, 1, 1, kBlock), 0, 0.5),
                 with_priority(prefilling_request(2, 48, 16, 2, kBlock), 0, 1.0)},
                {}, 0);
  EXPECT_EQ(p.slices, (Slices{{3, 40, 1}, {2, 16, 32}}));
  EXPECT_EQ(p.preempted, (Ids{1}));
}

// P = 1 is the baseline: on generated loads with arrivals, finishes and preemptions, both plugins
// produce the same plan at every step.
TEST(PartialPrefillScheduler, WithOnePartialPrefillPlansAreThoseOfChunked) {
  for (uint32_t threshold : {0u, 96u}) {
    for (uint32_t seed : {1u, 2u, 3u, 4u}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", threshold " + std::to_string(threshold));
      constexpr uint32_t kTotalBlocks = 96;
      const std::string options =
          "max_num_batched_tokens = 256\nmax_num_seqs = 8\nlong_prefill_token_threshold = " +
          std::to_string(threshold);
      SchedulerHarness chunked(kChunked, options, kBlock, kTotalBlocks, 4096);
      SchedulerHarness partial(kPartial, options + "\nmax_num_partial_prefills = 1", kBlock,
                               kTotalBlocks, 4096);
      SchedulerQueues q = queues(kTotalBlocks);
      std::mt19937 rng(seed);
      std::uniform_int_distribution<uint32_t> prompt(1, 700), output(1, 60), arrivals(0, 2);
      constexpr uint32_t kRequests = 150;
      uint64_t next_id = 0;
      uint64_t preemptions = 0;
      int steps = 0;
      while ((next_id < kRequests || !q.empty()) && steps < 100000) {
        for (uint32_t n = arrivals(rng); n > 0 && next_id < kRequests; --n) {
          q.waiting.push_back(waiting_request(next_id++, prompt(rng), output(rng)));
        }
        if (q.empty()) continue;
        Plan expected = chunked.schedule(q.running, q.waiting, q.kv_blocks_free);
        Plan actual = partial.schedule(q.running, q.waiting, q.kv_blocks_free);
        ASSERT_FALSE(actual.invalid.has_value()) << "step " << steps << ": " << *actual.invalid;
        ASSERT_EQ(actual.slices, expected.slices) << "step " << steps;
        ASSERT_EQ(actual.preempted, expected.preempted) << "step " << steps;
        preemptions += actual.preempted.size();
        q.apply(actual);
        ++steps;
      }
      ASSERT_TRUE(q.empty());
      EXPECT_GT(steps, 300);
      EXPECT_GT(preemptions, 0u) << "the load was meant to run out of KV blocks";
    }
  }
}

// A hand-worked run through a preemption to the end: the victim recomputes, nothing is lost.
TEST(PartialPrefillScheduler, PreemptedRequestResumesAndEverythingFinishes) {
  SchedulerHarness h(kPartial,
                     "max_num_batched_tokens = 64\nmax_num_partial_prefills = 2\n"
                     "long_prefill_token_threshold = 1000",
                     kBlock, 4);
  SchedulerQueues q = queues(4);  // 64 tokens of KV
  q.waiting = {waiting_request(1, 31, 3), waiting_request(2, 16, 3)};

  // Counted: 1, 2: share 32. 1 takes 31 (2 blocks), 2 takes 16 (1 block). 1 block left.
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 31}, {2, 0, 16}}));
  q.apply(p);
  EXPECT_EQ(q.kv_blocks_free, 1u);

  // Both decode: 1 at position 31 fits its 2 blocks, 2 at position 16 needs a second block.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 31, 1}, {2, 16, 1}}));
  q.apply(p);
  EXPECT_EQ(q.kv_blocks_free, 0u);

  // 1 at position 32 needs a third block, none free: the last in order (2) is preempted, freeing 2.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 32, 1}}));
  EXPECT_EQ(p.preempted, (Ids{2}));
  q.apply(p);
  EXPECT_EQ(q.finished.size(), 1u);  // 1 has its 3 outputs and frees its 3 blocks: 1 + 3 free
  EXPECT_EQ(q.kv_blocks_free, 4u);

  // 2 recomputes its prompt and 2 outputs (18 tokens, 2 blocks) and samples its third output.
  ASSERT_EQ(q.waiting.size(), 1u);
  EXPECT_EQ(q.waiting[0].total_tokens, 18u);
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{2, 0, 18}}));
  q.apply(p);
  EXPECT_TRUE(q.empty());
  ASSERT_EQ(q.finished.size(), 2u);
  for (const hw_request_view& r : q.finished) EXPECT_EQ(r.output_tokens, 3u) << r.id;
  EXPECT_EQ(q.kv_blocks_free, 4u);
}

// Property check on generated loads under KV pressure, P > 1, both policies: every plan is valid,
// every step with work makes progress, every request finishes with all its tokens, no block is
// lost.
TEST(PartialPrefillScheduler, EveryPlanIsValidAndEveryRequestFinishesUnderKvPressure) {
  for (const char* policy : {"fcfs", "priority"}) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE(std::string(policy) + ", seed " + std::to_string(seed));
      constexpr uint32_t kTotalBlocks = 64;  // 1024 tokens
      SchedulerHarness h(kPartial,
                         "max_num_batched_tokens = 256\nmax_num_seqs = 8\n"
                         "max_num_partial_prefills = 4\nmax_long_partial_prefills = 1\n"
                         "long_prefill_token_threshold = 128\npolicy = \"" +
                             std::string(policy) + "\"",
                         kBlock, kTotalBlocks, 4096);
      SchedulerQueues q = queues(kTotalBlocks);
      std::mt19937 rng(seed);
      std::uniform_int_distribution<uint32_t> prompt(1, 600), output(1, 100), arrivals(0, 2);
      std::uniform_int_distribution<int32_t> priority(0, 3);
      constexpr uint32_t kRequests = 60;
      uint64_t next_id = 0;
      uint64_t preemptions = 0;
      int steps = 0;
      while ((next_id < kRequests || !q.empty()) && steps < 100000) {
        for (uint32_t n = arrivals(rng); n > 0 && next_id < kRequests; --n) {
          q.waiting.push_back(with_priority(waiting_request(next_id, prompt(rng), output(rng)),
                                            priority(rng), static_cast<double>(next_id)));
          ++next_id;
        }
        if (q.empty()) continue;
        Plan p = h.schedule(q.running, q.waiting, q.kv_blocks_free);
        ASSERT_FALSE(p.invalid.has_value()) << "step " << steps << ": " << *p.invalid;
        ASSERT_FALSE(p.slices.empty() && p.preempted.empty())
            << "step " << steps << ": no progress with " << q.running.size() << " running and "
            << q.waiting.size() << " waiting";
        preemptions += p.preempted.size();
        q.apply(p);
        ++steps;
      }
      ASSERT_TRUE(q.empty()) << "not done after " << steps << " steps";
      ASSERT_EQ(q.finished.size(), kRequests);
      for (const hw_request_view& r : q.finished) {
        EXPECT_EQ(r.output_tokens, r.max_output_tokens) << "request " << r.id;
        EXPECT_EQ(r.computed_tokens + 1, r.total_tokens) << "request " << r.id;
      }
      EXPECT_EQ(q.kv_blocks_free, kTotalBlocks);
      EXPECT_GT(preemptions, 0u) << "the load was meant to run out of KV blocks";
    }
  }
}

}  // namespace
}  // namespace headway::test
