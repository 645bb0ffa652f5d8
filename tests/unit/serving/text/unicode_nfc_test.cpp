// to_nfc: Unicode Normalization Form C through utf8proc, with bytes that are not UTF-8 kept.
#include "unicode_nfc.h"

#include <gtest/gtest.h>

#include <string>

namespace headway::core {
namespace {

TEST(UnicodeNfc, ComposesWhatHasAComposedForm) {
  EXPECT_EQ(to_nfc("e\xCC\x81"), "\xC3\xA9");  // e + U+0301 -> U+00E9
  EXPECT_EQ(to_nfc("A\xCC\x8A"
                   "bc"),
            "\xC3\x85"
            "bc");                                                // A + U+030A -> U+00C5
  EXPECT_EQ(to_nfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");  // Hangul L + V -> U+AC00
  // The Angstrom sign U+212B is a singleton: its NFC is U+00C5.
  EXPECT_EQ(to_nfc("\xE2\x84\xAB"), "\xC3\x85");
}

TEST(UnicodeNfc, KeepsWhatIsAlreadyComposedAndCompatibilityForms) {
  EXPECT_EQ(to_nfc(""), "");
  EXPECT_EQ(to_nfc("plain ASCII, 42!"), "plain ASCII, 42!");
  EXPECT_EQ(to_nfc("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"), "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC");
  EXPECT_EQ(to_nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");  // the "fi" ligature: NFKC's, not NFC's
}

TEST(UnicodeNfc, BytesThatAreNotUtf8StayAndTheTextAroundIsNormalized) {
  EXPECT_EQ(to_nfc("e\xCC\x81\xFF"
                   "e\xCC\x81"),
            "\xC3\xA9\xFF\xC3\xA9");
  EXPECT_EQ(to_nfc(std::string("\xC3", 1)), std::string("\xC3", 1));  // a character cut short
  EXPECT_EQ(to_nfc(std::string("a\0b", 3)), std::string("a\0b", 3));
}

}  // namespace
}  // namespace headway::core
