// Where a chat prompt leaves the thinking: read in the current turn only (after the template's
// last role marker), so that a "<think>" in the user's words or an earlier turn's think block is
// not taken for the prompt's, and a long continued thought still is.
#include "prompt_reasoning.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "prompt_encoder.h"
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
    return prompt_reasoning(tokenizer_, TurnMarkers(tokenizer_, generation_prompt_), prompt_,
                            "</think>");
  }

  PieceTokenizer tokenizer_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> generation_prompt_;  // what the template writes to open the answer
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

// DeepSeek's role markers are added tokens but not special (they decode as text): the one its
// template writes to open the answer starts the turn all the same, so R1's own system prompt
// ("... enclosed within <think> </think> tags") is not the assistant's turn.
TEST_F(PromptReasoningTest, TheAddedTokenThatOpensTheAnswerStartsTheTurn) {
  generation_prompt_ = {tokenizer_.id("<｜Assistant｜>", Kind::kAdded)};
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

// helper-160's cases: other added tokens that are not special are text. Qwen's "<tool_call>" in a
// continued answer after its closed thinking, and a converted SentencePiece vocabulary's "\n"
// (Gemma's), even where the template writes it to open the answer.
TEST_F(PromptReasoningTest, OtherAddedTokensAreText) {
  turn("user", {"Weather?"});
  turn("assistant", {"<think>", "Look", ".", "</think>", "\n\n"}, /*open=*/true);
  prompt_.push_back(tokenizer_.id("<tool_call>", Kind::kAdded));
  prompt_.push_back(tokenizer_.id("{\"name\": "));
  EXPECT_EQ(where(), PromptReasoning::kEnded);  // was kNone: the turn began after <tool_call>

  prompt_.clear();
  const int32_t newline = tokenizer_.id("\n", Kind::kAdded);
  generation_prompt_ = {tokenizer_.id("<start_of_turn>", Kind::kSpecial), tokenizer_.id("model"),
                        newline};
  for (const int32_t id : generation_prompt_) prompt_.push_back(id);
  prompt_.push_back(tokenizer_.id("<think>"));
  prompt_.push_back(newline);
  EXPECT_EQ(where(), PromptReasoning::kOpen);  // the "\n" after "<think>" does not start a turn
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
  const TurnMarkers turns(*tokenizer, tokenizer->encode("<｜Assistant｜>"));
  const auto where = [&](const std::string& rendered) {
    return prompt_reasoning(*tokenizer, turns, tokenizer->encode(rendered), "</think>");
  };
  const std::string asked =
      "<|begin_of_text|>Reason within <think> </think> tags.<｜User｜>Capital?<｜Assistant｜>";
  EXPECT_EQ(where(asked), PromptReasoning::kNone);  // was kEnded: the system prompt's tags
  EXPECT_EQ(where(asked + "<think>\n"), PromptReasoning::kOpen);
  EXPECT_EQ(where(asked + "<think>\nHmm.</think>\n\n"), PromptReasoning::kEnded);
}

// The whole chain as admission runs it: a DeepSeek-R1-shaped checkpoint (role markers and think
// tags added tokens that are not special) with an R1-style template, whose generation prompt
// gives "<｜Assistant｜>" as the turn's marker; the system prompt's tags do not count.
class DeepSeekShapedCheckpoint : public ::testing::Test {
 protected:
  void write(const std::string& generation_prompt, const std::string& otherwise = "") {
    testing::TinyBpe spec;
    spec.chat_template =
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}"
        "{% elif m['role'] == 'user' %}<｜User｜>{{ m['content'] }}"
        "{% else %}<｜Assistant｜>{{ m['content'] }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}" +
        generation_prompt + "{% else %}" + otherwise + "{% endif %}";
    testing::write_tiny_bpe(dir_.path(), spec);
    nlohmann::json tokenizer_json = testing::tiny_bpe_json(spec);
    int32_t next = testing::kEotId + 1;
    for (const char* added : {"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"}) {
      tokenizer_json["added_tokens"].push_back(
          testing::added_token_json(next++, added, /*special=*/false, /*normalized=*/false));
    }
    std::ofstream(dir_.path() / "tokenizer.json", std::ios::trunc) << tokenizer_json.dump();
    tokenizer_ = core::Tokenizer::load(dir_.path());
    encoder_ = std::make_unique<PromptEncoder>(tokenizer_, dir_.path());
  }
  PromptReasoning where() const {
    GenerateInput chat;
    chat.prompt_kind = GenerateInput::PromptKind::kChat;
    chat.messages = {{"system", "Reason within <think> </think> tags."}, {"user", "Capital?"}};
    const TurnMarkers turns(*tokenizer_, encoder_->generation_prompt());
    return prompt_reasoning(*tokenizer_, turns, encoder_->encode(chat), "</think>");
  }

  testing::TempDir dir_{"prompt_reasoning_r1"};
  std::shared_ptr<const core::Tokenizer> tokenizer_;
  std::unique_ptr<PromptEncoder> encoder_;
};

TEST_F(DeepSeekShapedCheckpoint, TheTemplatesGenerationPromptGivesTheTurnsMarker) {
  write("<｜Assistant｜>");
  EXPECT_EQ(encoder_->generation_prompt(), tokenizer_->encode("<｜Assistant｜>"));
  EXPECT_EQ(where(), PromptReasoning::kNone);
  write("<｜Assistant｜><think>\n");  // R1's updated template
  EXPECT_EQ(where(), PromptReasoning::kOpen);
  // Phi-3's way: something else written in its place without add_generation_prompt (an end
  // token), so the two renderings part as tokens, not by a suffix.
  write("<｜Assistant｜>", "<|eot_id|>");
  EXPECT_EQ(encoder_->generation_prompt(), tokenizer_->encode("<｜Assistant｜>"));
  EXPECT_EQ(where(), PromptReasoning::kNone);
}

// A template that refuses a lone user message is asked again with a system message first.
TEST_F(DeepSeekShapedCheckpoint, ATemplateThatWantsASystemMessageStillGivesItsGenerationPrompt) {
  testing::TinyBpe spec;
  spec.chat_template =
      "{% if messages[0]['role'] != 'system' %}{{ raise_exception('system first') }}{% endif %}"
      "{% for m in messages %}{{ m['content'] }}{% endfor %}"
      "{% if add_generation_prompt %}<|start_header_id|>{% endif %}";
  testing::write_tiny_bpe(dir_.path(), spec);
  tokenizer_ = core::Tokenizer::load(dir_.path());
  encoder_ = std::make_unique<PromptEncoder>(tokenizer_, dir_.path());
  EXPECT_EQ(encoder_->generation_prompt(), std::vector<int32_t>{testing::kStartHeader});
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
