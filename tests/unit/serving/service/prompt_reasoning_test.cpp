// Where a chat prompt leaves the thinking: read in the current turn only (after the template's
// last role marker), so that a "<think>" in the user's words or an earlier turn's think block is
// not taken for the prompt's, and a long continued thought still is.
#include "prompt_reasoning.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tiny_bpe.h"

namespace headway::serving {
namespace {

// A tokenizer over whole pieces: each id is one piece. Special pieces show only with special
// tokens (as Hugging Face's tokenizers decode them); added ones (added_tokens that are not special,
// as DeepSeek's "<｜Assistant｜>") show always and are known as added (special_token_text).
class PieceTokenizer final : public core::Tokenizer {
 public:
  enum class Kind { kPlain, kAdded, kSpecial };
  // The id of `piece`, added at its first use.
  int32_t id(const std::string& piece, Kind kind = Kind::kPlain) {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (pieces_[i] == piece && kinds_[i] == kind) return static_cast<int32_t>(i);
    }
    pieces_.push_back(piece);
    kinds_.push_back(kind);
    return static_cast<int32_t>(pieces_.size() - 1);
  }
  std::vector<int32_t> encode(std::string_view) const override { return {}; }
  std::string decode(std::span<const int32_t> ids) const override { return text(ids, false); }
  std::string decode_with_special_tokens(std::span<const int32_t> ids) const override {
    return text(ids, true);
  }
  std::string special_token_text(int32_t id) const override {
    return kinds_[id] == Kind::kPlain ? std::string() : pieces_[id];
  }
  int32_t bos() const override { return -1; }
  int32_t eos() const override { return -1; }
  uint32_t vocab_size() const override { return static_cast<uint32_t>(pieces_.size()); }
  std::string_view kind() const override { return "pieces"; }

 private:
  std::string text(std::span<const int32_t> ids, bool with_special) const {
    std::string out;
    for (const int32_t id : ids) {
      if (with_special || kinds_[id] != Kind::kSpecial) out += pieces_[id];
    }
    return out;
  }
  std::vector<std::string> pieces_;
  std::vector<Kind> kinds_;
};

using Kind = PieceTokenizer::Kind;

class PromptReasoningTest : public ::testing::Test {
 protected:
  // Appends Qwen's chat markup: "<|im_start|>role\n" (special marker), the pieces, and
  // "<|im_end|>\n" unless `open`.
  void turn(const std::string& role, const std::vector<std::string>& pieces, bool open = false) {
    prompt_.push_back(tokenizer_.id("<|im_start|>", Kind::kSpecial));
    prompt_.push_back(tokenizer_.id(role));
    prompt_.push_back(tokenizer_.id("\n"));
    for (const std::string& piece : pieces) prompt_.push_back(tokenizer_.id(piece));
    if (!open) {
      prompt_.push_back(tokenizer_.id("<|im_end|>", Kind::kSpecial));
      prompt_.push_back(tokenizer_.id("\n"));
    }
  }
  // The markers are found anew each time: the tests add pieces as they go.
  PromptReasoning where() const {
    return prompt_reasoning(tokenizer_, TurnMarkers(tokenizer_), prompt_, "</think>");
  }

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
  prompt_.push_back(tokenizer_.id("<think>", Kind::kSpecial));
  prompt_.push_back(tokenizer_.id("\n"));
  EXPECT_EQ(where(), PromptReasoning::kOpen);
}

// DeepSeek's role markers are added tokens but not special (they decode as text): they start a turn
// all the same, so R1's own system prompt ("... enclosed within <think> </think> tags") is not
// the assistant's turn. Qwen's "<think>" is an added token too, and is part of the turn.
TEST_F(PromptReasoningTest, AddedTokensThatAreNotSpecialStartATurnButTagsDoNot) {
  for (const char* piece : {"Reason", " within", " <think>", " </think>", " tags", "."}) {
    prompt_.push_back(tokenizer_.id(piece));
  }
  prompt_.push_back(tokenizer_.id("<｜User｜>", Kind::kAdded));
  prompt_.push_back(tokenizer_.id("Capital?"));
  prompt_.push_back(tokenizer_.id("<｜Assistant｜>", Kind::kAdded));
  EXPECT_EQ(where(), PromptReasoning::kNone);
  prompt_.push_back(tokenizer_.id("<think>", Kind::kAdded));
  prompt_.push_back(tokenizer_.id("\n"));
  EXPECT_EQ(where(), PromptReasoning::kOpen);
}

// The same through a real byte-level BPE tokenizer.json shaped as DeepSeek-R1's: its role markers
// and think tags are added tokens with "special": false, its BOS a special one.
TEST(PromptReasoning, ADeepSeekShapedTokenizerJsonFindsTheAssistantsTurn) {
  testing::TempDir dir("prompt_reasoning_deepseek");
  nlohmann::json tokenizer_json = testing::tiny_bpe_json({});
  int32_t next = testing::kEotId + 1;
  for (const char* added : {"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"}) {
    tokenizer_json["added_tokens"].push_back(
        testing::added_token_json(next++, added, /*special=*/false, /*normalized=*/false));
  }
  std::ofstream(dir.path() / "tokenizer.json") << tokenizer_json.dump();
  const std::unique_ptr<core::Tokenizer> tokenizer = core::Tokenizer::load(dir.path());
  const TurnMarkers turns(*tokenizer);
  const auto where = [&](const std::string& rendered) {
    return prompt_reasoning(*tokenizer, turns, tokenizer->encode(rendered), "</think>");
  };
  const std::string asked =
      "<|begin_of_text|>Reason within <think> </think> tags.<｜User｜>Capital?<｜Assistant｜>";
  EXPECT_EQ(where(asked), PromptReasoning::kNone);  // was kEnded: the system prompt's tags
  EXPECT_EQ(where(asked + "<think>\n"), PromptReasoning::kOpen);
  EXPECT_EQ(where(asked + "<think>\nHmm.</think>\n\n"), PromptReasoning::kEnded);
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
