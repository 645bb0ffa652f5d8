#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/serving/bench/completion_chunk.h>
#include <headway/serving/bench/stream_measurement.h>

#include <cmath>
#include <string>

namespace headway::serving::bench {
namespace {

SseEvent data(std::string payload) { return SseEvent{"", std::move(payload)}; }

std::string text_chunk(const std::string& text, const std::string& extra = "") {
  return R"({"choices":[{"index":0,"text":")" + text + "\"" + extra + R"(,"finish_reason":null}]})";
}

std::string usage_chunk(uint32_t completion) {
  return R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":)" +
         std::to_string(completion) + "}}";
}

TEST(CompletionChunk, ReadsCompletionAndChatShapes) {
  CompletionChunk c = parse_completion_chunk(
      R"({"choices":[{"text":"hi","token_ids":[1,2,3],"finish_reason":"length"}]})");
  EXPECT_TRUE(c.has_choice);
  EXPECT_EQ(c.text, "hi");
  EXPECT_EQ(c.tokens, 3u);
  EXPECT_EQ(c.finish_reason, "length");

  c = parse_completion_chunk(
      R"({"choices":[{"delta":{"content":"yo"},"logprobs":{"tokens":["y","o"]}}]})");
  EXPECT_EQ(c.text, "yo");
  EXPECT_EQ(c.tokens, 2u);

  c = parse_completion_chunk(usage_chunk(7));
  EXPECT_FALSE(c.has_choice);
  EXPECT_EQ(c.usage_completion_tokens, 7u);
  EXPECT_FALSE(c.usage_cached_tokens);

  c = parse_completion_chunk(R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,)"
                             R"("prompt_tokens_details":{"cached_tokens":8}}})");
  EXPECT_EQ(c.usage_cached_tokens, 8u);
  c = parse_completion_chunk(
      R"({"choices":[],"usage":{"completion_tokens":2,"prompt_tokens_details":null}})");
  EXPECT_FALSE(c.usage_cached_tokens);

  c = parse_completion_chunk(R"({"error":{"message":"boom","code":500}})");
  EXPECT_EQ(c.error, "boom");
}

TEST(CompletionChunk, RejectsWhatIsNotAChunkQuotingIt) {
  try {
    parse_completion_chunk("{not json");
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("{not json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_completion_chunk(R"({"choices":{"text":"a"}})"), core::Error);
  EXPECT_THROW(parse_completion_chunk(R"({"choices":[{"text":5}]})"), core::Error);
  EXPECT_THROW(parse_completion_chunk(R"({"usage":{"completion_tokens":-1}})"), core::Error);
  EXPECT_THROW(parse_completion_chunk(R"({"usage":{"prompt_tokens_details":3}})"), core::Error);
  EXPECT_THROW(
      parse_completion_chunk(R"({"usage":{"prompt_tokens_details":{"cached_tokens":"8"}}})"),
      core::Error);
}

TEST(StreamMeasurement, OneTokenPerChunkGivesOneTokenTimePerChunk) {
  StreamMeasurement m(1.0);
  m.on_event(data(text_chunk("a")), 1.5);
  m.on_event(data(text_chunk("")), 1.6);  // no text, no count: not a token
  m.on_event(data(text_chunk("b")), 1.7);
  m.on_event(data(text_chunk("c")), 2.0);
  m.on_event(data(usage_chunk(3)), 2.0);
  m.on_event(data("[DONE]"), 2.1);
  const StreamResult r = m.finish(2.2);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.sent, 1.0);
  EXPECT_EQ(r.first_token, 1.5);
  EXPECT_EQ(r.finish, 2.1);
  EXPECT_EQ(r.output_tokens, 3u);
  EXPECT_EQ(r.token_times, (std::vector<double>{1.5, 1.7, 2.0}));
  EXPECT_EQ(r.usage_completion_tokens, 3u);
}

TEST(StreamMeasurement, ChunksOfSeveralTokensSpreadOverTheGapBeforeThem) {
  StreamMeasurement m(0.0);
  m.on_event(data(text_chunk("ab", R"(,"token_ids":[1,2])")), 1.0);
  m.on_event(data(text_chunk("cde", R"(,"token_ids":[3,4,5])")), 1.6);
  m.on_event(data("[DONE]"), 1.6);
  const StreamResult r = m.finish(1.6);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.token_times.size(), 5u);
  // The first chunk's tokens all arrive with it; the next three split 1.0..1.6 in equal steps.
  EXPECT_DOUBLE_EQ(r.token_times[0], 1.0);
  EXPECT_DOUBLE_EQ(r.token_times[1], 1.0);
  EXPECT_DOUBLE_EQ(r.token_times[2], 1.2);
  EXPECT_DOUBLE_EQ(r.token_times[3], 1.4);
  EXPECT_DOUBLE_EQ(r.token_times[4], 1.6);
}

TEST(StreamMeasurement, RunningUsageCountsTheTokensOfEachChunk) {
  StreamMeasurement m(0.0);
  m.on_event(data(R"({"choices":[{"text":"a"}],"usage":{"completion_tokens":1}})"), 1.0);
  m.on_event(data(R"({"choices":[{"text":"bcd"}],"usage":{"completion_tokens":4}})"), 2.5);
  m.on_event(data("[DONE]"), 2.5);
  const StreamResult r = m.finish(2.5);
  EXPECT_EQ(r.token_times, (std::vector<double>{1.0, 1.5, 2.0, 2.5}));
}

// A server that puts its final usage on the last content chunk (not a chunk of its own): the count
// adds only the tokens the chunks had not shown, never all of them again.
TEST(StreamMeasurement, UsageOnTheLastContentChunkIsNotCountedTwice) {
  StreamMeasurement m(0.0);
  m.on_event(data(text_chunk("a")), 1.0);
  m.on_event(data(text_chunk("b")), 2.0);
  m.on_event(data(R"({"choices":[{"text":"c"}],"usage":{"completion_tokens":3}})"), 3.0);
  m.on_event(data("[DONE]"), 3.0);
  const StreamResult r = m.finish(3.0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.output_tokens, 3u);
  EXPECT_EQ(r.token_times, (std::vector<double>{1.0, 2.0, 3.0}));
}

TEST(StreamMeasurement, UsageBeyondTheCountedTokensIsSpreadOverTheChunks) {
  // Three text chunks without counts, but the usage says 7 tokens: 7 = 2 + 2 + 3, the remainder
  // going to the latest chunk.
  StreamMeasurement m(0.0);
  m.on_event(data(text_chunk("a")), 1.0);
  m.on_event(data(text_chunk("b")), 2.0);
  m.on_event(data(text_chunk("c")), 3.5);
  m.on_event(data(usage_chunk(7)), 3.5);
  m.on_event(data("[DONE]"), 3.5);
  const StreamResult r = m.finish(3.5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.output_tokens, 7u);
  EXPECT_EQ(r.token_times, (std::vector<double>{1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5}));
}

TEST(StreamMeasurement, StreamsThatDoNotFinishProperlyAreFailures) {
  {
    StreamMeasurement m(0.0);
    m.on_event(data(text_chunk("a")), 1.0);
    const StreamResult r = m.finish(1.5);
    EXPECT_EQ(r.failure, FailureKind::kCutShort);
    EXPECT_EQ(r.finish, 1.5);
    EXPECT_EQ(r.output_tokens, 1u);  // what did arrive is kept for the record
  }
  {
    StreamMeasurement m(0.0);
    m.on_event(data("[DONE]"), 1.0);
    EXPECT_EQ(m.finish(1.0).failure, FailureKind::kNoTokens);
    EXPECT_TRUE(std::isnan(m.finish(1.0).first_token));
  }
  {
    StreamMeasurement m(0.0);
    m.on_event(data(text_chunk("a")), 1.0);
    m.on_event(data(R"({"error":{"message":"engine failed"}})"), 1.2);
    m.on_event(data("[DONE]"), 1.3);  // ignored after the failure
    const StreamResult r = m.finish(1.3);
    EXPECT_EQ(r.failure, FailureKind::kStreamError);
    EXPECT_EQ(r.message, "engine failed");
    EXPECT_EQ(r.finish, 1.2);
  }
  {
    StreamMeasurement m(0.0);
    m.on_event(SseEvent{"error", "something broke"}, 1.0);
    EXPECT_EQ(m.finish(1.0).failure, FailureKind::kStreamError);
    EXPECT_EQ(m.finish(1.0).message, "something broke");
  }
  {
    StreamMeasurement m(0.0);
    m.on_event(data("{oops"), 1.0);
    const StreamResult r = m.finish(1.0);
    EXPECT_EQ(r.failure, FailureKind::kBadChunk);
    EXPECT_NE(r.message.find("{oops"), std::string::npos);
  }
}

TEST(StreamMeasurement, TheFirstFailureWinsAndNoneCountsAfterDone) {
  StreamMeasurement m(0.0);
  m.fail(FailureKind::kHttpStatus, "HTTP 503: overloaded", 0.5, 503);
  m.fail(FailureKind::kTransport, "later", 0.6);
  StreamResult r = m.finish(0.7);
  EXPECT_EQ(r.failure, FailureKind::kHttpStatus);
  EXPECT_EQ(r.http_status, 503);
  EXPECT_EQ(r.finish, 0.5);

  StreamMeasurement done(0.0);
  done.on_event(data(text_chunk("a")), 1.0);
  done.on_event(data("[DONE]"), 1.0);
  done.fail(FailureKind::kTransport, "connection reset after the end", 1.1);
  EXPECT_TRUE(done.finish(1.1).ok());
}

// A server that counts far more completion tokens than the request's max_tokens is not measured:
// its count is refused (a usage of a million tokens became a million token times, 6.6M tokens/s in
// the report, and could exhaust memory), and the request fails as too_many_tokens.
TEST(StreamMeasurement, MoreTokensThanMaxTokensIsAFailure) {
  StreamMeasurement m(0.0, 12);
  m.on_event(data(text_chunk("a")), 1.0);
  m.on_event(data(text_chunk("b")), 2.0);
  m.on_event(data(usage_chunk(1000000)), 2.0);
  m.on_event(data("[DONE]"), 2.0);
  StreamResult r = m.finish(2.0);
  EXPECT_EQ(r.failure, FailureKind::kTooManyTokens);
  EXPECT_NE(r.message.find("1000000 completion tokens for max_tokens 12"), std::string::npos)
      << r.message;
  EXPECT_EQ(r.output_tokens, 0u);
  EXPECT_TRUE(r.token_times.empty());
  // A server one token over (counting its stop token) is measured as it says, and the bound is
  // 2 x 12 + 16 = 40: 40 is taken, 41 refused.
  for (const uint32_t usage : {13u, 40u, 41u}) {
    StreamMeasurement near(0.0, 12);
    near.on_event(data(text_chunk("a")), 1.0);
    near.on_event(data(usage_chunk(usage)), 1.0);
    near.on_event(data("[DONE]"), 1.0);
    r = near.finish(1.0);
    if (usage <= 40) {
      EXPECT_TRUE(r.ok()) << usage << ": " << r.message;
      EXPECT_EQ(r.output_tokens, usage);
    } else {
      EXPECT_EQ(r.failure, FailureKind::kTooManyTokens) << usage;
    }
  }
}

TEST(StreamMeasurement, FailureNamesAreTheReportKeys) {
  EXPECT_EQ(failure_name(FailureKind::kHttpStatus), "http_status");
  EXPECT_EQ(failure_name(FailureKind::kCutShort), "cut_short");
  EXPECT_EQ(failure_name(FailureKind::kTransport), "transport");
  EXPECT_EQ(failure_name(FailureKind::kTooManyTokens), "too_many_tokens");
  EXPECT_EQ(failure_name(FailureKind::kInterrupted), "interrupted");
}

}  // namespace
}  // namespace headway::serving::bench
