// Where a chat prompt leaves the thinking: read in the current turn only (after the template's
// last role marker), so that a "<think>" in the user's words or an earlier turn's think block is
// not taken for the prompt's, and a long continued thought still is.
#include "prompt_reasoning.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace headway::serving {
namespace {

// A tokenizer over whole pieces: each id is one piece, special pieces shown only with special
// tokens (as Hugging Face's tokenizers decode them).
class PieceTokenizer final : public core::Tokenizer {
 public:
  // The id of `piece`, added at its first use.
  int32_t id(const std::string& piece, bool special = false) {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (pieces_[i] == piece && special_[i] == special) return static_cast<int32_t>(i);
    }
    pieces_.push_back(piece);
    special_.push_back(special);
    return static_cast<int32_t>(pieces_.size() - 1);
  }
  std::vector<int32_t> encode(std::string_view) const override { return {}; }
  std::string decode(std::span<const int32_t> ids) const override { return text(ids, false); }
  std::string decode_with_special_tokens(std::span<const int32_t> ids) const override {
    return text(ids, true);
  }
  int32_t bos() const override { return -1; }
  int32_t eos() const override { return -1; }
  uint32_t vocab_size() const override { return static_cast<uint32_t>(pieces_.size()); }
  std::string_view kind() const override { return "pieces"; }

 private:
  std::string text(std::span<const int32_t> ids, bool with_special) const {
    std::string out;
    for (const int32_t id : ids) {
      if (with_special || !special_[id]) out += pieces_[id];
    }
    return out;
  }
  std::vector<std::string> pieces_;
  std::vector<bool> special_;
};

class PromptReasoningTest : public ::testing::Test {
 protected:
  // Appends Qwen's chat markup: "<|im_start|>role\n" (special marker), the pieces, and
  // "<|im_end|>\n" unless `open`.
  void turn(const std::string& role, const std::vector<std::string>& pieces, bool open = false) {
    prompt_.push_back(tokenizer_.id("<|im_start|>", true));
    prompt_.push_back(tokenizer_.id(role));
    prompt_.push_back(tokenizer_.id("\n"));
    for (const std::string& piece : pieces) prompt_.push_back(tokenizer_.id(piece));
    if (!open) {
      prompt_.push_back(tokenizer_.id("<|im_end|>", true));
      prompt_.push_back(tokenizer_.id("\n"));
    }
  }
  PromptReasoning where() const { return prompt_reasoning(tokenizer_, prompt_, "</think>"); }

  PieceTokenizer tokenizer_;
  std::vector<int32_t> prompt_;
};

TEST_F(PromptReasoningTest, TheAssistantsTurnOpenedClosedOrNeither) {
  turn("user", {"Capital", "?"});
  turn("assistant", {"<think>", "\n"}, /*open=*/true);  // Qwen3-Thinking-2507's template
  EXPECT_EQ(where(), PromptReasoning::kOpen);
  prompt_.clear();
  turn("user", {"Capital", "?"});
  turn("assistant", {"<think>", "\n\n", "</think>", "\n\n"}, true);  // enable_thinking off
  EXPECT_EQ(where(), PromptReasoning::kEnded);
  prompt_.clear();
  turn("user", {"Capital", "?"});
  turn("assistant", {}, true);
  EXPECT_EQ(where(), PromptReasoning::kNone);
}

// helper-158's cases: the last 32 tokens used to be read whatever turn they were in.
TEST_F(PromptReasoningTest, TheUsersWordsAndEarlierTurnsAreNotThePrompts) {
  turn("user", {"How", " do", " I", " strip", " the", " <think>", " tags", "?"});
  turn("assistant", {}, true);
  EXPECT_EQ(where(),
            PromptReasoning::kNone);  // was kOpen: an instruct model's answer all reasoning
  prompt_.clear();
  turn("user", {"Capital", "?"});
  turn("assistant", {"<think>", "Paris", ".", "</think>", "Paris", "."});
  turn("user", {"Sure", "?"});
  turn("assistant", {}, true);
  EXPECT_EQ(where(), PromptReasoning::kNone);  // was kEnded
}

TEST_F(PromptReasoningTest, AContinuedThoughtLongerThanTheOldWindowIsStillOpen) {
  std::vector<std::string> thought = {"<think>", "\n"};
  for (int i = 0; i < 200; ++i) thought.push_back(" word");
  turn("user", {"Capital", "?"});
  turn("assistant", thought, /*open=*/true);   // continue_final_message
  EXPECT_EQ(where(), PromptReasoning::kOpen);  // was kNone past 32 tokens
}

TEST_F(PromptReasoningTest, AReasoningTagMarkedSpecialIsPartOfTheTurn) {
  turn("user", {"Capital", "?"});
  turn("assistant", {}, true);
  prompt_.push_back(tokenizer_.id("<think>", /*special=*/true));
  prompt_.push_back(tokenizer_.id("\n"));
  EXPECT_EQ(where(), PromptReasoning::kOpen);
}

// A template without special tokens has no turn to find: the last kFallbackTokens tokens are read.
TEST_F(PromptReasoningTest, WithoutSpecialTokensTheLastTokensAreRead) {
  for (const char* piece : {"User", ":", " <think>", "\n"}) prompt_.push_back(tokenizer_.id(piece));
  for (size_t i = 0; i < kFallbackTokens; ++i) prompt_.push_back(tokenizer_.id(" x"));
  EXPECT_EQ(where(), PromptReasoning::kNone);
  prompt_.push_back(tokenizer_.id("<think>"));
  EXPECT_EQ(where(), PromptReasoning::kOpen);
}

}  // namespace
}  // namespace headway::serving
