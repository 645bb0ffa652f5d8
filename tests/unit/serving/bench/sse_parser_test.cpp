#include <gtest/gtest.h>
#include <headway/serving/bench/sse_parser.h>

#include <string>
#include <vector>

namespace headway::serving::bench {
namespace {

std::vector<SseEvent> parse_in_pieces(const std::string& stream, size_t piece) {
  SseParser parser;
  std::vector<SseEvent> events;
  for (size_t i = 0; i < stream.size(); i += piece) {
    parser.feed(std::string_view(stream).substr(i, piece), events);
  }
  EXPECT_FALSE(parser.has_partial_event());
  return events;
}

TEST(SseParser, SplitsEventsWhereverTheBytesAreCut) {
  const std::string stream =
      "data: {\"a\":1}\n\n: keep-alive\n\nevent: error\ndata: bad\n\r\ndata: one\r\ndata: "
      "two\r\n\r\n"
      "data: [DONE]\n\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    const std::vector<SseEvent> events = parse_in_pieces(stream, piece);
    ASSERT_EQ(events.size(), 4u) << "piece " << piece;
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[0].event, "");
    EXPECT_EQ(events[1].event, "error");
    EXPECT_EQ(events[1].data, "bad");
    EXPECT_EQ(events[2].data, "one\ntwo");
    EXPECT_EQ(events[3].data, "[DONE]");
  }
}

TEST(SseParser, AcceptsLoneCarriageReturnsAndNoSpaceAfterTheColon) {
  const std::vector<SseEvent> events = parse_in_pieces("data:x\r\rdata:  y\n\n", 1);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].data, "x");
  EXPECT_EQ(events[1].data, " y");  // only one space is part of the syntax
}

TEST(SseParser, DropsEventsWithoutDataAndReportsAnUnfinishedOne) {
  SseParser parser;
  std::vector<SseEvent> events;
  parser.feed("event: ping\n\nid: 3\n\n", events);
  EXPECT_TRUE(events.empty());
  EXPECT_FALSE(parser.has_partial_event());
  parser.feed("data: {\"cut", events);
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(parser.has_partial_event());
  parser.feed("\"}\n", events);
  EXPECT_TRUE(parser.has_partial_event());  // the blank line is still missing
  parser.feed("\n", events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "{\"cut\"}");
}

}  // namespace
}  // namespace headway::serving::bench
