#include <gtest/gtest.h>
#include <headway/serving/echoed_input.h>

#include <nlohmann/json.hpp>
#include <string>

namespace headway::serving {
namespace {

// What an HTTP error body does with a message: nlohmann refuses text that is not UTF-8.
bool is_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

TEST(QuoteInput, AShortInputIsQuotedAsItIs) {
  EXPECT_EQ(quote_input("tiny"), "\"tiny\"");
  EXPECT_EQ(quote_input(""), "\"\"");
  EXPECT_EQ(quote_input("caf\u00e9 \u65e5\u672c"), "\"caf\u00e9 \u65e5\u672c\"");
}

TEST(QuoteInput, QuotesBackslashesAndControlBytesAreEscaped) {
  EXPECT_EQ(quote_input("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote_input("line\nbreak\x7f"), "\"line\\x0abreak\\x7f\"");
  EXPECT_EQ(quote_input(std::string("nul\0", 4)), "\"nul\\x00\"");
}

TEST(QuoteInput, BytesThatAreNotUtf8AreEscaped) {
  // A lone continuation byte, an overlong '/', a surrogate, a cut three-byte character.
  const std::string quoted = quote_input("\x80\xc0\xaf\xed\xa0\x80\xe6\x97");
  EXPECT_EQ(quoted, "\"\\x80\\xc0\\xaf\\xed\\xa0\\x80\\xe6\\x97\"");
  EXPECT_TRUE(is_utf8(quoted));
}

TEST(QuoteInput, ALongInputIsCutAndItsSizeGiven) {
  const std::string quoted = quote_input(std::string(5 << 20, 'm'));
  EXPECT_EQ(quoted, "\"" + std::string(kMaxEchoedBytes, 'm') + "\u2026\" (5242880 bytes)");
}

TEST(QuoteInput, TheCutFallsBetweenCharacters) {
  // 43 three-byte characters: the cut after 21 of them (63 bytes), not inside the 22nd.
  std::string input;
  for (int i = 0; i < 43; ++i) input += "\u65e5";
  const std::string quoted = quote_input(input);
  std::string kept;
  for (int i = 0; i < 21; ++i) kept += "\u65e5";
  EXPECT_EQ(quoted, "\"" + kept + "\u2026\" (129 bytes)");
  EXPECT_TRUE(is_utf8(quoted));
}

TEST(Shortened, AMessageWithinTheLimitIsKept) {
  EXPECT_EQ(shortened("model \"x\" is not served here", 64), "model \"x\" is not served here");
  EXPECT_EQ(shortened(std::string(64, 'a'), 64), std::string(64, 'a'));
}

TEST(Shortened, ALongMessageIsCutBetweenCharactersWithItsSize) {
  EXPECT_EQ(shortened(std::string(100, 'a'), 10), std::string(10, 'a') + "\u2026 (100 bytes)");
  // "é" is two bytes: a cut at 5 would split the third one.
  const std::string cut = shortened("\u00e9\u00e9\u00e9\u00e9", 5);
  EXPECT_EQ(cut, "\u00e9\u00e9\u2026 (8 bytes)");
  EXPECT_TRUE(is_utf8(cut));
}

// Continuation bytes with no character to belong to: the cut backs up at most the three a
// character can have, not through the whole message.
TEST(Shortened, TextThatIsNotUtf8LosesAtMostThreeBytesAtTheCut) {
  EXPECT_EQ(shortened(std::string(100, '\x80'), 10), std::string(7, '\x80') + "\u2026 (100 bytes)");
}

}  // namespace
}  // namespace headway::serving
