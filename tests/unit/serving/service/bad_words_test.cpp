// vLLM's bad_words encoding: as written and after a space, the second only where it is as long and
// starts with another token; leading whitespace dropped; an empty word refused by name.
#include "bad_words.h"

#include <gtest/gtest.h>
#include <headway/serving/service_error.h>

#include <map>
#include <string>
#include <vector>

namespace headway::serving {
namespace {

// Encodes whole strings through a table (what a BPE tokenizer would give), nothing else.
class TableTokenizer final : public core::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    const auto it = table_.find(std::string(text));
    return it == table_.end() ? std::vector<int32_t>{} : it->second;
  }
  std::string decode(std::span<const int32_t>) const override { return {}; }
  std::string decode_with_special_tokens(std::span<const int32_t>) const override { return {}; }
  int32_t bos() const override { return -1; }
  int32_t eos() const override { return -1; }
  uint32_t vocab_size() const override { return 100; }
  std::string_view kind() const override { return "table"; }

 private:
  std::map<std::string, std::vector<int32_t>> table_ = {
      {"ab", {5, 6}}, {" ab", {7, 6}},      // a word-start token: both kept
      {"cd", {8, 9}}, {" cd", {10, 8, 9}},  // the space is a token of its own: one kept
      {"ef", {11}},   {" ef", {11}},        // the same first token: one kept
  };
};

TEST(BadWords, EachWordAsWrittenAndAfterASpaceWhereThatIsAnotherToken) {
  const TableTokenizer tokenizer;
  const std::vector<std::string> words = {"ab", "  cd", "\tef"};
  EXPECT_EQ(bad_words_token_ids(tokenizer, words),
            (std::vector<std::vector<int32_t>>{{5, 6}, {7, 6}, {8, 9}, {11}}));
}

TEST(BadWords, AWordOfNothingButWhitespaceIsRefusedByName) {
  const TableTokenizer tokenizer;
  const std::vector<std::string> words = {"ab", "   "};
  try {
    bad_words_token_ids(tokenizer, words);
    FAIL() << "an empty word was taken";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "bad_words");
    EXPECT_NE(std::string(e.what()).find("bad_words[1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headway::serving
