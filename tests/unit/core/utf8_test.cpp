// core::utf8: what text going to people and JSON becomes when its bytes are not valid UTF-8.
// Expectations are Python's bytes.decode("utf-8", "replace"), which substitutes one U+FFFD per
// maximal subpart, as the Unicode standard recommends and WHATWG decoders do.
#include <gtest/gtest.h>
#include <headway/core/utf8.h>

#include <random>
#include <string>
#include <vector>

namespace headway::core::utf8 {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

std::string valid(std::string_view bytes) {
  std::string out;
  append_valid(bytes, out);
  return out;
}

std::string replacements(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += kReplacement;
  return out;
}

TEST(Utf8, InvalidBytesAreReplacedOncePerMaximalSubpart) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\xF3\xA2\xCAy", replacements(2) + "y"},  // a truncated 4-byte character, then a lead
      {"\xE5\x97\xC4", replacements(2)},         // its valid beginning is one U+FFFD
      {"\xE0\x80\xAF", replacements(3)},         // overlong: E0 cannot take 80
      {"\xED\xA0\x80", replacements(3)},         // a surrogate
      {"\xF4\x90\x80\x80", replacements(4)},     // above U+10FFFF
      {"\xC0\xAF", replacements(2)},             // C0 never starts a character
      {"\xF0\x9F\x99"
       "A",
       kReplacement + "A"},                                         // cut short by ASCII
      {"\xF0\x9F\x99\x82\x80", "\xF0\x9F\x99\x82" + kReplacement},  // a stray continuation
      {"\xE2\x82", kReplacement},                                   // cut short by the end
      {"a\xE2\x82\xAC"
       "b",
       "a\xE2\x82\xAC"
       "b"},  // valid text is kept as it is
  };
  for (const auto& [bytes, expected] : cases) {
    EXPECT_EQ(valid(bytes), expected) << bytes.size() << " bytes";
    EXPECT_EQ(is_valid(bytes), bytes == expected);
  }
}

// What the incremental decoder relies on: text cut after the part that is final (before its
// incomplete tail) gives the same characters as the whole.
TEST(Utf8, CuttingBeforeTheIncompleteTailChangesNothing) {
  std::mt19937 rng(11);
  for (int round = 0; round < 5000; ++round) {
    std::string bytes;
    for (int i = 0; i < 10; ++i) {
      const unsigned r = rng() % 4;
      bytes += static_cast<char>(r == 0   ? 0x80 + rng() % 64
                                 : r == 1 ? 0xC0 + rng() % 64
                                 : r == 2 ? rng() % 128
                                          : rng() % 256);
    }
    for (size_t cut = 0; cut <= bytes.size(); ++cut) {
      const std::string_view head = std::string_view(bytes).substr(0, cut);
      const size_t final_bytes = head.size() - incomplete_tail(head);
      ASSERT_EQ(
          valid(head.substr(0, final_bytes)) + valid(std::string_view(bytes).substr(final_bytes)),
          valid(bytes))
          << "round " << round << " cut " << cut;
    }
  }
}

TEST(Utf8, IncompleteTailIsTheBeginningOfACharacterStillOpen) {
  EXPECT_EQ(incomplete_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_tail("a\xF0"), 1u);
  EXPECT_EQ(incomplete_tail("a\xE2\x82\xAC"), 0u);  // complete
  EXPECT_EQ(incomplete_tail("a\xE0\x80"), 0u);      // can never complete
  EXPECT_EQ(incomplete_tail("\xF3\xA2\xCA"), 1u);   // only the last lead is still open
  EXPECT_EQ(complete_length("\xE2\x82\xAC!"), 3u);
  EXPECT_EQ(complete_length("\xE2\x82"), 0u);
  EXPECT_EQ(complete_length("\x80"), 0u);
}

TEST(Utf8, CodePointsCountTheBytesThatBeginACharacter) {
  EXPECT_EQ(code_points(""), 0u);
  EXPECT_EQ(code_points("abc"), 3u);
  EXPECT_EQ(code_points("\xC3\xA9t\xC3\xA9"), 3u);             // "été"
  EXPECT_EQ(code_points("\xE2\x82\xAC\xF0\x9F\x98\x80"), 2u);  // "€😀"
}

}  // namespace
}  // namespace headway::core::utf8
