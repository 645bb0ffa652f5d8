// The baseline chunked scheduler (vLLM V1 semantics), loaded as a plugin and driven step by step on
// hand-built queues. Every expected plan below is worked out by hand from the rules in
// chunked_scheduler.cpp's header comment; every plan is also checked by core::PlanValidator.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../../test_support/captured_log.h"
#include "../../test_support/scheduler_harness.h"

namespace headway::test {
namespace {

constexpr uint32_t kBlock = 16;
const char* const kChunked = HEADWAY_PLUGIN_DIR "/headway_scheduler_chunked.so";

using Slices = std::vector<hw_slice>;
using Ids = std::vector<uint64_t>;

// Plans one step and checks it is valid; the plan is returned for exact comparison.
Plan plan_step(SchedulerHarness& h, const std::vector<hw_request_view>& running,
               const std::vector<hw_request_view>& waiting, uint32_t kv_free) {
  Plan p = h.schedule(running, waiting, kv_free);
  EXPECT_FALSE(p.invalid.has_value()) << "invalid plan: " << p.invalid.value_or("");
  return p;
}

Plan plan_step(SchedulerHarness& h, SchedulerQueues& q) {
  return plan_step(h, q.running, q.waiting, q.kv_blocks_free);
}

TEST(ChunkedScheduler, LimitsComeFromTheOptions) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 512\nmax_num_seqs = 3");
  EXPECT_EQ(h.limits().max_num_batched_tokens, 512u);
  EXPECT_EQ(h.limits().max_num_seqs, 3u);

  SchedulerHarness defaults(kChunked, "");
  EXPECT_EQ(defaults.limits().max_num_batched_tokens, 8192u);
  EXPECT_EQ(defaults.limits().max_num_seqs, 256u);

  EXPECT_THROW(SchedulerHarness(kChunked, "max_num_batched_token = 512"), core::Error);
  EXPECT_THROW(SchedulerHarness(kChunked, "max_num_batched_tokens = 0"), core::Error);
}

// A budget below max_num_seqs is accepted (vLLM refuses it; the conformance suite's tiny_budget
// traces run budgets of 1-48 with the default max_num_seqs), with a warning naming both: a step
// serves at most `budget` requests, and the decodes past them wait.
TEST(ChunkedScheduler, ABudgetBelowMaxNumSeqsIsWarnedAbout) {
  test::CapturedLog log;
  SchedulerHarness(kChunked, "max_num_batched_tokens = 64\nmax_num_seqs = 64");
  EXPECT_EQ(log.text().find("< max_num_seqs"), std::string::npos) << log.text();
  SchedulerHarness(kChunked, "max_num_batched_tokens = 63\nmax_num_seqs = 64");
  EXPECT_NE(log.text().find("chunked: max_num_batched_tokens (63) < max_num_seqs (64)"),
            std::string::npos)
      << log.text();
}

TEST(ChunkedScheduler, EmptyQueuesGiveAnEmptyPlan) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 512");
  Plan p = plan_step(h, {}, {}, 100);
  EXPECT_TRUE(p.slices.empty());
  EXPECT_TRUE(p.preempted.empty());
}

// A continuing prefill takes what it needs first; the waiting prompt gets a chunk of the rest.
TEST(ChunkedScheduler, BudgetSplitBetweenContinuingPrefillAndNewPrompt) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 512");
  SchedulerQueues q;
  q.block_size = kBlock;
  q.kv_blocks_free = 1000;
  q.next_admission = 1;
  q.running = {prefilling_request(1, 1000, 512, 0, kBlock)};  // 32 blocks held
  q.waiting = {waiting_request(2, 300)};

  // 1000 - 512 = 488 for request 1, the remaining 24 for request 2.
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 512, 488}, {2, 0, 24}}));
  EXPECT_TRUE(p.preempted.empty());
  q.apply(p);
  // Request 1: 63 blocks for 1000 tokens (31 new); request 2: 2 blocks for 24 tokens.
  EXPECT_EQ(q.kv_blocks_free, 1000u - 31u - 2u);

  // Request 1 sampled its first token and decodes; request 2 continues with 276 of its prompt.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 1000, 1}, {2, 24, 276}}));
  EXPECT_TRUE(p.preempted.empty());
  q.apply(p);

  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 1001, 1}, {2, 300, 1}}));
}

TEST(ChunkedScheduler, WaitingPromptsShareWhatIsLeftInQueueOrder) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 100");
  SchedulerQueues q;
  q.block_size = kBlock;
  q.kv_blocks_free = 1000;
  q.waiting = {waiting_request(1, 60), waiting_request(2, 70), waiting_request(3, 10)};

  // 60 for request 1, a chunk of 40 for request 2, nothing left for request 3.
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 0, 60}, {2, 0, 40}}));
  q.apply(p);

  // Request 1 decodes, request 2 finishes its prompt, request 3 is admitted whole.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 60, 1}, {2, 40, 30}, {3, 0, 10}}));
}

TEST(ChunkedScheduler, RunningRequestsFirstInAdmissionOrderThenWaiting) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 1000");
  const std::vector<hw_request_view> running = {
      decoding_request(10, 100, 3, 0, kBlock),      // computed 102 of 103
      prefilling_request(11, 500, 100, 1, kBlock),  // 400 prompt tokens left
      decoding_request(12, 50, 1, 2, kBlock),       // computed 50 of 51
  };
  const std::vector<hw_request_view> waiting = {waiting_request(13, 200)};
  Plan p = plan_step(h, running, waiting, 1000);
  EXPECT_EQ(p.slices, (Slices{{10, 102, 1}, {11, 100, 400}, {12, 50, 1}, {13, 0, 200}}));
  EXPECT_TRUE(p.preempted.empty());
}

// V1 semantics, on purpose: running requests are served strictly in admission order, so a long
// running prefill may use the budget a later-admitted decode needed.
TEST(ChunkedScheduler, EarlierRunningPrefillCanTakeTheBudgetOfALaterDecode) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 300");
  const std::vector<hw_request_view> running = {
      decoding_request(10, 100, 3, 0, kBlock),
      prefilling_request(11, 500, 100, 1, kBlock),
      decoding_request(12, 50, 1, 2, kBlock),
  };
  const std::vector<hw_request_view> waiting = {waiting_request(13, 200)};
  Plan p = plan_step(h, running, waiting, 1000);
  EXPECT_EQ(p.slices, (Slices{{10, 102, 1}, {11, 100, 299}}));
  EXPECT_TRUE(p.preempted.empty());
}

TEST(ChunkedScheduler, MaxNumSeqsStopsAdmissions) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 1000\nmax_num_seqs = 3");
  std::vector<hw_request_view> running = {decoding_request(1, 20, 1, 0, kBlock),
                                          decoding_request(2, 20, 1, 1, kBlock)};
  const std::vector<hw_request_view> waiting = {waiting_request(3, 20), waiting_request(4, 20),
                                                waiting_request(5, 20)};
  // Two running + one admitted = 3.
  Plan p = plan_step(h, running, waiting, 1000);
  EXPECT_EQ(p.slices, (Slices{{1, 20, 1}, {2, 20, 1}, {3, 0, 20}}));

  // Already three running: only their work, nobody admitted.
  running.push_back(prefilling_request(3, 40, 16, 2, kBlock));
  p = plan_step(h, running, {waiting[1], waiting[2]}, 1000);
  EXPECT_EQ(p.slices, (Slices{{1, 20, 1}, {2, 20, 1}, {3, 16, 24}}));
}

TEST(ChunkedScheduler, LongPrefillThresholdCapsEveryRequestPerStep) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 1000\nlong_prefill_token_threshold = 100");
  SchedulerQueues q;
  q.block_size = kBlock;
  q.kv_blocks_free = 10000;
  q.next_admission = 2;
  q.running = {prefilling_request(1, 500, 100, 0, kBlock), decoding_request(2, 40, 2, 1, kBlock)};
  q.waiting = {waiting_request(3, 300), waiting_request(4, 50), waiting_request(5, 1000)};

  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 100, 100}, {2, 41, 1}, {3, 0, 100}, {4, 0, 50}, {5, 0, 100}}));
  q.apply(p);

  // Request 4 finished its 50-token prompt and now decodes; the others take 100 more each.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices,
            (Slices{{1, 200, 100}, {2, 42, 1}, {3, 100, 100}, {4, 50, 1}, {5, 100, 100}}));
}

TEST(ChunkedScheduler, FcfsWaitingHeadThatDoesNotFitInKvStopsAdmission) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 8192");
  // Request 1 decodes at position 32: it needs a third block.
  const std::vector<hw_request_view> running = {decoding_request(1, 32, 1, 0, kBlock)};
  // Request 2 needs 13 blocks, request 3 only 1; 5 are free, 4 after request 1's decode.
  const std::vector<hw_request_view> waiting = {waiting_request(2, 200), waiting_request(3, 10)};
  Plan p = plan_step(h, running, waiting, 5);
  EXPECT_EQ(p.slices, (Slices{{1, 32, 1}}));
  EXPECT_TRUE(p.preempted.empty());

  // Nothing running: the head still does not fit and is not shrunk to fit; nobody overtakes it.
  p = plan_step(h, {}, waiting, 5);
  EXPECT_TRUE(p.slices.empty());
  EXPECT_TRUE(p.preempted.empty());

  // A chunk that the *budget* limits does fit: 63 tokens, 4 blocks.
  SchedulerHarness small(kChunked, "max_num_batched_tokens = 64");
  p = plan_step(small, running, waiting, 5);
  EXPECT_EQ(p.slices, (Slices{{1, 32, 1}, {2, 0, 63}}));

  // A request whose KV moved here holds the blocks of all it will compute and takes no free one:
  // it passes the head (whose blocks it may be holding: with nothing running the engine stalled),
  // the prompt behind it still does not.
  const std::vector<hw_request_view> with_moved = {
      waiting_request(2, 200), moved_request(4, 300, kBlock), waiting_request(3, 10)};
  p = plan_step(h, {}, with_moved, 5);
  EXPECT_EQ(p.slices, (Slices{{4, 300, 1}}));
}

TEST(ChunkedScheduler, PreemptsTheMostRecentlyAdmittedWhenKvRunsOut) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 8192");
  SchedulerQueues q;
  q.block_size = kBlock;
  q.kv_blocks_free = 0;
  q.next_admission = 3;
  q.running = {
      decoding_request(1, 32, 1, 0, kBlock),  // 2 blocks, needs a third
      decoding_request(2, 32, 1, 1, kBlock),  // 2 blocks, needs a third
      decoding_request(3, 40, 5, 2, kBlock),  // computed 44 of 45: 3 blocks, needs none
  };
  q.waiting = {waiting_request(4, 10)};

  // Request 1 needs a block: the tail (3) is preempted, freeing 3; 1 and 2 take one each. Nobody
  // is admitted in a step that preempted, although a block and budget are left.
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 32, 1}, {2, 32, 1}}));
  EXPECT_EQ(p.preempted, (Ids{3}));
  q.apply(p);
  EXPECT_EQ(q.kv_blocks_free, 1u);  // 0 + 3 freed - 2 taken
  ASSERT_EQ(q.waiting.size(), 2u);
  EXPECT_EQ(q.waiting[0].id, 3u);  // back at the head of the queue
  EXPECT_EQ(q.waiting[0].computed_tokens, 0u);
  EXPECT_EQ(q.waiting[0].total_tokens, 45u);  // outputs kept: recomputes 45 tokens

  // Request 3 must recompute 45 tokens (3 blocks) but only 1 is free: it stays at the head and
  // request 4, which would fit, does not overtake it.
  p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 33, 1}, {2, 33, 1}}));
  EXPECT_TRUE(p.preempted.empty());
}

TEST(ChunkedScheduler, PreemptsSeveralTailsUntilTheBlocksFit) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 8192");
  SchedulerQueues q;
  q.block_size = kBlock;
  q.kv_blocks_free = 1;
  q.next_admission = 3;
  q.running = {
      prefilling_request(1, 100, 32, 0, kBlock),  // 68 left: 7 blocks for 100, 5 new
      decoding_request(2, 32, 1, 1, kBlock),      // 2 blocks
      decoding_request(3, 32, 1, 2, kBlock),      // 2 blocks
  };
  // 1 free < 5: preempt 3 (3 free), still < 5: preempt 2 (5 free); request 1 takes all 5.
  Plan p = plan_step(h, q);
  EXPECT_EQ(p.slices, (Slices{{1, 32, 68}}));
  EXPECT_EQ(p.preempted, (Ids{3, 2}));
  q.apply(p);
  EXPECT_EQ(q.kv_blocks_free, 0u);
  ASSERT_EQ(q.waiting.size(), 2u);
  EXPECT_EQ(q.waiting[0].id, 2u);  // earlier admitted first
  EXPECT_EQ(q.waiting[1].id, 3u);
}

TEST(ChunkedScheduler, SelfPreemptionWhenTheRequestIsTheTail) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 8192");
  const std::vector<hw_request_view> waiting = {waiting_request(3, 5)};

  // Request 1 fits in its blocks; request 2, the tail, needs one and none is free: it preempts
  // itself, and nobody is admitted.
  std::vector<hw_request_view> running = {decoding_request(1, 40, 2, 0, kBlock),
                                          decoding_request(2, 32, 1, 1, kBlock)};
  Plan p = plan_step(h, running, waiting, 0);
  EXPECT_EQ(p.slices, (Slices{{1, 41, 1}}));
  EXPECT_EQ(p.preempted, (Ids{2}));

  // Alone and out of blocks: a plan of one preemption and no slice.
  p = plan_step(h, {running[1]}, waiting, 0);
  EXPECT_TRUE(p.slices.empty());
  EXPECT_EQ(p.preempted, (Ids{2}));

  // Request 1 needs 3 blocks; preempting the tail frees 1 (2 free), not enough, so request 1
  // preempts itself too.
  running = {prefilling_request(1, 64, 16, 0, kBlock), prefilling_request(2, 100, 16, 1, kBlock)};
  p = plan_step(h, running, waiting, 1);
  EXPECT_TRUE(p.slices.empty());
  EXPECT_EQ(p.preempted, (Ids{2, 1}));
}

// A preempted request is readmitted only when its whole recompute fits with a block of growth for
// each running request (V1 readmits it on its first chunk, and a long one then preempts itself at
// a later chunk, over and over). Nobody overtakes it; a request never preempted keeps V1's rule.
TEST(ChunkedScheduler, APreemptedRequestWaitsUntilItsWholeRecomputeFits) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 2048");
  // Two decodes whose next token needs no new block; a preempted request of 4,000 prompt and 10
  // output tokens (251 blocks to recompute), a short prompt behind it.
  const std::vector<hw_request_view> running = {decoding_request(1, 40, 2, 0, kBlock),
                                                decoding_request(2, 40, 1, 1, kBlock)};
  hw_request_view preempted = waiting_request(5, 4000, 100);
  preempted.output_tokens = 10;
  preempted.total_tokens = 4010;
  preempted.preemptions = 1;
  const std::vector<hw_request_view> waiting = {preempted, waiting_request(6, 50)};

  // Its first chunk (2,046 tokens, 128 blocks) fits in 252 free blocks, its recompute and two
  // blocks of growth (253) do not: only the decodes run.
  Plan p = plan_step(h, running, waiting, 252);
  EXPECT_EQ(p.slices, (Slices{{1, 41, 1}, {2, 40, 1}}));
  EXPECT_TRUE(p.preempted.empty());

  p = plan_step(h, running, waiting, 253);
  EXPECT_EQ(p.slices, (Slices{{1, 41, 1}, {2, 40, 1}, {5, 0, 2046}}));

  // Never preempted, the same request is admitted on its first chunk.
  hw_request_view fresh = preempted;
  fresh.preemptions = 0;
  p = plan_step(h, running, {fresh, waiting_request(6, 50)}, 128);
  EXPECT_EQ(p.slices, (Slices{{1, 41, 1}, {2, 40, 1}, {5, 0, 2046}}));

  // Alone, it needs its 251 blocks and no more.
  p = plan_step(h, {}, waiting, 251);
  EXPECT_EQ(p.slices, (Slices{{5, 0, 2048}}));
}

// The yardstick: with budget 2048 a 10000-token prompt ahead of a 50-token one keeps it waiting
// until its own last chunk leaves room.
TEST(ChunkedScheduler, ReproducesHeadOfLineBlocking) {
  SchedulerHarness h(kChunked, "max_num_batched_tokens = 2048");
  SchedulerQueues q;
  q.block_size = kBlock;
  q.kv_blocks_free = 100000;
  q.waiting = {waiting_request(1, 10000, 2), waiting_request(2, 50, 2)};

  const std::vector<Slices> expected = {
      {{1, 0, 2048}},
      {{1, 2048, 2048}},
      {{1, 4096, 2048}},
      {{1, 6144, 2048}},
      {{1, 8192, 1808}, {2, 0, 50}},  // 2048 - 1808 = 240 left: the short prompt fits at last
      {{1, 10000, 1}, {2, 50, 1}},
  };
  int short_first_step = -1;
  int long_last_chunk_step = -1;
  for (size_t step = 0; step < expected.size(); ++step) {
    Plan p = plan_step(h, q);
    EXPECT_EQ(p.slices, expected[step]) << "step " << step;
    EXPECT_TRUE(p.preempted.empty());
    for (const hw_slice& s : p.slices) {
      if (s.request_id == 2 && short_first_step < 0) short_first_step = static_cast<int>(step);
      if (s.request_id == 1 && s.start + s.tokens == 10000) {
        long_last_chunk_step = static_cast<int>(step);
      }
    }
    q.apply(p);
  }
  EXPECT_EQ(short_first_step, 4);
  EXPECT_EQ(long_last_chunk_step, 4);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.finished.size(), 2u);

  // The same two prompts the other way round: the short one goes first, at once.
  SchedulerHarness h2(kChunked, "max_num_batched_tokens = 2048");
  Plan p = plan_step(h2, {}, {waiting_request(2, 50, 2), waiting_request(1, 10000, 2)}, 100000);
  EXPECT_EQ(p.slices, (Slices{{2, 0, 50}, {1, 0, 1998}}));
}

// Property check on generated loads under KV pressure: every plan is valid, every step with work
// makes progress, every request finishes with all its tokens, and no block is lost.
TEST(ChunkedScheduler, EveryPlanIsValidAndEveryRequestFinishesUnderKvPressure) {
  for (uint32_t threshold : {0u, 96u}) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", threshold " + std::to_string(threshold));
      constexpr uint32_t kTotalBlocks = 64;  // 1024 tokens
      SchedulerHarness h(kChunked,
                         "max_num_batched_tokens = 256\nmax_num_seqs = 8\n"
                         "long_prefill_token_threshold = " +
                             std::to_string(threshold),
                         kBlock, kTotalBlocks, 4096);
      SchedulerQueues q;
      q.block_size = kBlock;
      q.kv_blocks_free = kTotalBlocks;
      std::mt19937 rng(seed);
      std::uniform_int_distribution<uint32_t> prompt(1, 600), output(1, 100), arrivals(0, 2);
      constexpr uint32_t kRequests = 60;
      uint64_t next_id = 0;
      uint64_t preemptions = 0;
      int steps = 0;
      while ((next_id < kRequests || !q.empty()) && steps < 100000) {
        for (uint32_t n = arrivals(rng); n > 0 && next_id < kRequests; --n) {
          q.waiting.push_back(waiting_request(next_id++, prompt(rng), output(rng)));
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
      }
      EXPECT_EQ(q.kv_blocks_free, kTotalBlocks);
      EXPECT_GT(preemptions, 0u) << "the load was meant to run out of KV blocks";
    }
  }
}

}  // namespace
}  // namespace headway::test
