#include <gtest/gtest.h>
#include <headway/serving/request_stream.h>

#include <string>
#include <thread>

namespace headway::serving {
namespace {

using namespace std::chrono_literals;

// Each token id is one character ('a' + id); "STOP" is spelled by ids that map to 'S','T','O','P'
// only through the test's own table, so a plain substring search stands in for a real decoder.
class LetterDecoder : public IncrementalDecoder {
 public:
  explicit LetterDecoder(std::string stop) : stop_(std::move(stop)) {}
  std::string append(std::span<const int32_t> ids) override {
    if (stopped_) return {};
    for (int32_t id : ids) held_ += static_cast<char>('a' + id);
    if (!stop_.empty()) {
      if (auto at = held_.find(stop_); at != std::string::npos) {
        stopped_ = true;
        ids_before_stop_ = given_ + at + stop_.size();  // one character per id
        return held_.substr(0, at);
      }
    }
    // Hold back the longest ending that may begin the stop string, as a real decoder does.
    size_t keep = stop_.empty() ? 0 : std::min(held_.size(), stop_.size() - 1);
    while (keep > 0 && held_.compare(held_.size() - keep, keep, stop_, 0, keep) != 0) --keep;
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, out.size());
    given_ += out.size();
    return out;
  }
  StopReason stop_reason() const override { return stopped_ ? StopReason(stop_) : StopReason(); }
  size_t ids_before_stop() const override { return ids_before_stop_; }
  std::string flush() override { return std::exchange(held_, {}); }
  std::string token_bytes(int32_t id) const override {
    return std::string(1, static_cast<char>('a' + id));
  }

 private:
  std::string stop_;
  std::string held_;
  size_t given_ = 0;  // ids whose characters were returned (held_ holds the next ones)
  size_t ids_before_stop_ = 0;
  bool stopped_ = false;
};

TEST(RequestStream, DeliversTokensThenTheFinishOnce) {
  RequestStream stream("r1", 5, std::make_unique<LetterDecoder>(""), nullptr);
  const int32_t ids[] = {0, 1, 2};
  stream.push_tokens(ids);
  StreamChunk chunk;
  ASSERT_TRUE(stream.next(chunk, 0ms));
  EXPECT_EQ(chunk.token_ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(chunk.text, "abc");
  EXPECT_EQ(chunk.finish, Finish::kNone);
  EXPECT_FALSE(stream.next(chunk, 0ms));  // nothing new

  stream.finish(Finish::kLength, Timings{0.1, 0.2, 0.3, 0.0});
  ASSERT_TRUE(stream.next(chunk, 0ms));
  EXPECT_EQ(chunk.finish, Finish::kLength);
  EXPECT_EQ(chunk.usage.prompt_tokens, 5u);
  EXPECT_EQ(chunk.usage.completion_tokens, 3u);
  EXPECT_DOUBLE_EQ(chunk.timings.ttft_seconds, 0.2);
  EXPECT_TRUE(stream.done());
  EXPECT_FALSE(stream.next(chunk, 10ms));
}

// Log-probabilities pushed with the tokens come out beside them, across pushes, each candidate
// with its token's bytes; a chunk of tokens pushed without them has none.
TEST(RequestStream, LogprobsFollowTheirTokens) {
  RequestStream stream("r1", 5, std::make_unique<LetterDecoder>(""), nullptr);
  const core::TokenLogprob top_a[] = {{0, -0.1f}, {3, -2.5f}};
  const core::TokenLogprob top_b[] = {{2, -0.3f}};
  const int32_t a[] = {0};
  const core::SampledLogprobs first[] = {{-0.1f, top_a}};
  stream.push_tokens(a, first);
  const int32_t b[] = {1};
  const core::SampledLogprobs second[] = {{-1.5f, top_b}};
  stream.push_tokens(b, second);
  StreamChunk chunk;
  ASSERT_TRUE(stream.next(chunk, 0ms));
  ASSERT_EQ(chunk.logprobs.size(), 2u);
  EXPECT_EQ(chunk.logprobs[0].chosen.token, 0);
  EXPECT_EQ(chunk.logprobs[0].chosen.logprob, -0.1f);
  EXPECT_EQ(chunk.logprobs[0].chosen.bytes, "a");
  ASSERT_EQ(chunk.logprobs[0].top.size(), 2u);
  EXPECT_EQ(chunk.logprobs[0].top[1].token, 3);
  EXPECT_EQ(chunk.logprobs[0].top[1].logprob, -2.5f);
  EXPECT_EQ(chunk.logprobs[0].top[1].bytes, "d");
  EXPECT_EQ(chunk.logprobs[1].chosen.logprob, -1.5f);
  ASSERT_EQ(chunk.logprobs[1].top.size(), 1u);
  EXPECT_EQ(chunk.logprobs[1].top[0].bytes, "c");
  stream.push_tokens(a);
  ASSERT_TRUE(stream.next(chunk, 0ms));
  EXPECT_EQ(chunk.token_ids, std::vector<int32_t>{0});
  EXPECT_TRUE(chunk.logprobs.empty());
}

// Prompt figures: position 0's entry (no figures) comes first, with the first chunk; a position
// handed over before is dropped when it comes again (a recomputed prompt); figures after the first
// token are ignored; each candidate has its token's bytes.
TEST(RequestStream, PromptLogprobsComeOnceEachInPositionOrderBeforeTheTokens) {
  RequestStream stream("r1", 4, std::make_unique<LetterDecoder>(""), nullptr);
  stream.expect_prompt_logprobs(7);
  const core::TokenLogprob top[] = {{3, -0.2f}, {1, -0.9f}};
  const core::PromptTokenLogprobs first[] = {{1, 1, -0.9f, 2, top}, {2, 4, -3.0f, 5, {}}};
  stream.push_prompt_logprobs(first);
  StreamChunk chunk;
  ASSERT_TRUE(stream.next(chunk, 0ms));
  EXPECT_TRUE(chunk.token_ids.empty());
  ASSERT_EQ(chunk.prompt_logprobs.size(), 3u);
  EXPECT_EQ(chunk.prompt_logprobs[0].position, 0u);
  EXPECT_FALSE(chunk.prompt_logprobs[0].has_figures);
  EXPECT_EQ(chunk.prompt_logprobs[0].token.token, 7);
  EXPECT_EQ(chunk.prompt_logprobs[0].token.bytes, "h");
  const PromptLogprobs& one = chunk.prompt_logprobs[1];
  EXPECT_TRUE(one.has_figures);
  EXPECT_EQ(one.position, 1u);
  EXPECT_EQ(one.token.token, 1);
  EXPECT_EQ(one.token.logprob, -0.9f);
  EXPECT_EQ(one.token.bytes, "b");
  EXPECT_EQ(one.rank, 2u);
  ASSERT_EQ(one.top.size(), 2u);
  EXPECT_EQ(one.top[0].token, 3);
  EXPECT_EQ(one.top[0].bytes, "d");
  EXPECT_EQ(chunk.prompt_logprobs[2].rank, 5u);
  EXPECT_TRUE(chunk.prompt_logprobs[2].top.empty());

  // Computed again from the start: positions 1 and 2 are dropped, 3 is new.
  const core::PromptTokenLogprobs again[] = {
      {1, 1, -0.9f, 2, top}, {2, 4, -3.0f, 5, {}}, {3, 2, -0.5f, 1, {}}};
  stream.push_prompt_logprobs(again);
  const int32_t token[] = {0};
  stream.push_tokens(token);
  const core::PromptTokenLogprobs late[] = {{4, 0, -0.1f, 1, {}}};
  stream.push_prompt_logprobs(late);
  ASSERT_TRUE(stream.next(chunk, 0ms));
  ASSERT_EQ(chunk.prompt_logprobs.size(), 1u);
  EXPECT_EQ(chunk.prompt_logprobs[0].position, 3u);
  EXPECT_EQ(chunk.token_ids, std::vector<int32_t>{0});
  EXPECT_FALSE(stream.next(chunk, 0ms));

  // Not asked for: none, not even position 0's.
  RequestStream plain("r2", 4, std::make_unique<LetterDecoder>(""), nullptr);
  plain.push_tokens(token);
  ASSERT_TRUE(plain.next(chunk, 0ms));
  EXPECT_TRUE(chunk.prompt_logprobs.empty());
}

TEST(RequestStream, PushesAfterTheFinishAreIgnored) {
  RequestStream stream("r", 1, nullptr, nullptr);
  stream.finish(Finish::kAbort, {});
  const int32_t ids[] = {7};
  stream.push_tokens(ids);
  stream.finish(Finish::kLength, {});  // the first finish wins
  StreamChunk chunk;
  ASSERT_TRUE(stream.next(chunk, 0ms));
  EXPECT_TRUE(chunk.token_ids.empty());
  EXPECT_EQ(chunk.finish, Finish::kAbort);
  EXPECT_EQ(chunk.usage.completion_tokens, 0u);
}

TEST(RequestStream, AStopStringFinishesTheStreamAndAbortsUpstream) {
  std::string aborted;
  RequestStream stream("r2", 1, std::make_unique<LetterDecoder>("de"),
                       [&](const std::string& id) { aborted = id; });
  const int32_t first[] = {0, 1, 2};
  stream.push_tokens(first);
  StreamChunk chunk;
  ASSERT_TRUE(stream.next(chunk, 0ms));
  EXPECT_EQ(chunk.text, "abc");
  const int32_t second[] = {3, 4};
  stream.push_tokens(second);
  ASSERT_TRUE(stream.next(chunk, 0ms));
  EXPECT_EQ(chunk.finish, Finish::kStop);
  EXPECT_EQ(aborted, "r2");
  EXPECT_FALSE(stream.next(chunk, 0ms));
}

// A read brings every id pushed since the last; those after the one that completed the stop
// string were generated before the abort reached the engine, and are not the answer's: not in its
// ids, its logprobs or its usage, however the pushes and reads fell (helper-143 saw up to
// max_tokens ids come back with finish "stop").
TEST(RequestStream, IdsPastTheStopStringAreNotTheAnswers) {
  for (const bool split : {false, true}) {
    RequestStream stream("r4", 2, std::make_unique<LetterDecoder>("de"), nullptr);
    const int32_t all[] = {0, 1, 2, 3, 4, 5, 6, 7};  // "abcdefgh": "de" ends at the 5th id
    const core::SampledLogprobs logprobs[] = {{-0.1f, {}}, {-0.2f, {}}, {-0.3f, {}}, {-0.4f, {}},
                                              {-0.5f, {}}, {-0.6f, {}}, {-0.7f, {}}, {-0.8f, {}}};
    std::vector<int32_t> ids;
    std::vector<float> chosen;
    StreamChunk chunk;
    const auto read = [&] {
      ASSERT_TRUE(stream.next(chunk, 0ms));
      ids.insert(ids.end(), chunk.token_ids.begin(), chunk.token_ids.end());
      for (const GeneratedLogprobs& l : chunk.logprobs) chosen.push_back(l.chosen.logprob);
    };
    if (split) {  // the stop string across two reads
      stream.push_tokens(std::span(all).first(4), std::span(logprobs).first(4));
      read();
      stream.push_tokens(std::span(all).subspan(4), std::span(logprobs).subspan(4));
    } else {
      stream.push_tokens(all, logprobs);
    }
    read();
    EXPECT_EQ(chunk.finish, Finish::kStop) << split;
    EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 2, 3, 4})) << split;
    EXPECT_EQ(chosen, (std::vector<float>{-0.1f, -0.2f, -0.3f, -0.4f, -0.5f})) << split;
    EXPECT_EQ(chunk.usage.completion_tokens, 5u) << split;
    EXPECT_EQ(chunk.usage.prompt_tokens, 2u);
  }
}

// Holds every id's text back, as a decoder holds an incomplete character's bytes; at the end the
// held text completes the stop string (a stop on U+FFFD, which only the flush writes).
class StopAtFlushDecoder final : public IncrementalDecoder {
 public:
  std::string append(std::span<const int32_t> ids) override {
    appended_ += ids.size();
    return {};
  }
  StopReason stop_reason() const override { return stopped_ ? StopReason("!") : StopReason(); }
  size_t ids_before_stop() const override { return stopped_ ? appended_ : 0; }
  std::string flush() override {
    stopped_ = true;
    return "x";
  }
  std::string token_bytes(int32_t) const override { return {}; }

 private:
  size_t appended_ = 0;
  bool stopped_ = false;
};

// A stop string completed only when the held text is given out at the end ends the request as
// `stop`, with its stop_reason, as the text says; it was reported as the producer's `length`.
TEST(RequestStream, AStopStringCompletedAtTheEndIsAStop) {
  RequestStream stream("r5", 1, std::make_unique<StopAtFlushDecoder>(), nullptr);
  const int32_t ids[] = {1, 2};
  stream.push_tokens(ids);
  stream.finish(Finish::kLength, {});
  StreamChunk chunk;
  ASSERT_TRUE(stream.next(chunk, 0ms));
  EXPECT_EQ(chunk.text, "x");
  EXPECT_EQ(chunk.finish, Finish::kStop);
  EXPECT_EQ(chunk.stop_reason, StopReason("!"));
  EXPECT_EQ(chunk.token_ids.size(), 2u);
  EXPECT_EQ(chunk.usage.completion_tokens, 2u);
}

TEST(RequestStream, TheConsumerWakesWhenTheProducerPushes) {
  RequestStream stream("r3", 1, nullptr, nullptr);
  std::thread producer([&] {
    for (int32_t i = 0; i < 100; ++i) stream.push_tokens(std::span<const int32_t>(&i, 1));
    stream.finish(Finish::kLength, {});
  });
  std::vector<int32_t> received;
  StreamChunk chunk;
  while (!stream.done()) {
    if (stream.next(chunk, 1s))
      received.insert(received.end(), chunk.token_ids.begin(), chunk.token_ids.end());
  }
  producer.join();
  ASSERT_EQ(received.size(), 100u);
  for (int32_t i = 0; i < 100; ++i) EXPECT_EQ(received[static_cast<size_t>(i)], i);
}

TEST(RequestStream, AStreamIsAdmittedFromTheStartUnlessToldOtherwise) {
  RequestStream local("r4", 1, nullptr, nullptr);
  EXPECT_TRUE(local.wait_admitted(0ms));
  EXPECT_FALSE(local.refusal());

  RequestStream routed("r5", 1, nullptr, nullptr, /*admitted=*/false);
  EXPECT_FALSE(routed.wait_admitted(0ms));
  std::thread producer([&] { routed.admit(); });
  EXPECT_TRUE(routed.wait_admitted(10s));
  producer.join();
  EXPECT_FALSE(routed.refusal());
}

// A refusal ends the wait for admission too, and the frontend can read it without consuming the
// stream; output also means the request was accepted.
TEST(RequestStream, ARefusalOrOutputEndsTheWaitForAdmission) {
  RequestStream refused("r6", 1, nullptr, nullptr, /*admitted=*/false);
  refused.refuse(ServiceError(ErrorCode::kResourceExhausted, "queue full"), {});
  EXPECT_TRUE(refused.wait_admitted(0ms));
  ASSERT_TRUE(refused.refusal());
  EXPECT_EQ(refused.refusal()->code(), ErrorCode::kResourceExhausted);
  EXPECT_STREQ(refused.refusal()->what(), "queue full");
  StreamChunk chunk;
  ASSERT_TRUE(refused.next(chunk, 0ms));
  EXPECT_EQ(chunk.finish, Finish::kError);

  RequestStream answered("r7", 1, nullptr, nullptr, /*admitted=*/false);
  const int32_t id = 3;
  answered.push_tokens(std::span<const int32_t>(&id, 1));
  EXPECT_TRUE(answered.wait_admitted(0ms));
  EXPECT_FALSE(answered.refusal());
}

}  // namespace
}  // namespace headway::serving
