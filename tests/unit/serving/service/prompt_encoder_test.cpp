// Where a prompt's BOS comes from (helper-207's review): a text prompt begins with it where the
// tokenizer adds one (Hugging Face's encode with its special tokens); a chat prompt has the BOS its
// template writes, as vLLM encodes chat prompts without adding special tokens. vLLM's
// add_special_tokens turns the tokenizer's BOS off for text and on for chat.
#include "prompt_encoder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tiny_bpe.h"

namespace headway::serving {
namespace {

class PromptEncoderBos : public ::testing::Test {
 protected:
  // A tiny BPE checkpoint with `chat_template`, and `config` merged into its
  // tokenizer_config.json.
  void write(const std::string& chat_template, const nlohmann::json& config = {}) {
    testing::TinyBpe spec;
    spec.chat_template = chat_template;
    testing::write_tiny_bpe(dir_.path(), spec);
    nlohmann::json merged = nlohmann::json::parse(read_config());
    if (config.is_object()) merged.update(config);
    testing::write_text(dir_.path() / "tokenizer_config.json", merged.dump());
    tokenizer_ = core::Tokenizer::load(dir_.path());
    encoder_ = std::make_unique<PromptEncoder>(tokenizer_, dir_.path());
  }
  std::string read_config() const {
    std::ifstream in(dir_.path() / "tokenizer_config.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // `ids` after `first`.
  static std::vector<int32_t> after(int32_t first, std::vector<int32_t> ids) {
    ids.insert(ids.begin(), first);
    return ids;
  }
  std::vector<int32_t> text(const std::string& prompt,
                            std::optional<bool> add_special_tokens = std::nullopt) const {
    GenerateInput input;
    input.prompt_kind = GenerateInput::PromptKind::kText;
    input.prompt_text = prompt;
    input.add_special_tokens = add_special_tokens;
    return encoder_->encode(input);
  }
  std::vector<int32_t> chat(const std::string& content,
                            std::optional<bool> add_special_tokens = std::nullopt) const {
    GenerateInput input;
    input.prompt_kind = GenerateInput::PromptKind::kChat;
    input.messages = {{"user", content}};
    input.add_special_tokens = add_special_tokens;
    return encoder_->encode(input);
  }

  testing::TempDir dir_{"prompt_encoder_bos"};
  std::shared_ptr<const core::Tokenizer> tokenizer_;
  std::unique_ptr<PromptEncoder> encoder_;
};

constexpr const char* kWritesBos =
    "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}";
constexpr const char* kChatMl =
    "{% for m in messages %}<|start_header_id|>{{ m['content'] }}<|eot_id|>{% endfor %}";

TEST_F(PromptEncoderBos, ATextPromptBeginsWithTheBosWhereTheTokenizerAddsOne) {
  write(kWritesBos);
  EXPECT_EQ(text("hi"), after(testing::kBeginOfText, tokenizer_->encode("hi")));
  write(kWritesBos, {{"add_bos_token", false}});
  EXPECT_EQ(text("hi"), tokenizer_->encode("hi"));
  // Qwen's tokenizer_config.json: no BOS, though config.json names the model's bos_token_id.
  testing::write_text(dir_.path() / "config.json", R"({"bos_token_id": 1001})");
  write(kChatMl, {{"bos_token", nullptr}});
  EXPECT_EQ(tokenizer_->bos(), -1);
  EXPECT_EQ(text("hi"), tokenizer_->encode("hi"));
}

TEST_F(PromptEncoderBos, AChatPromptHasTheBosItsTemplateWritesAndNoOther) {
  write(kWritesBos);
  EXPECT_EQ(chat("hi"), after(testing::kBeginOfText, tokenizer_->encode("hi")));
  write(kChatMl);  // a BOS is known, but this template does not write one
  const std::vector<int32_t> ids = chat("hi");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), testing::kStartHeader);
  EXPECT_EQ(ids, tokenizer_->encode("<|start_header_id|>hi<|eot_id|>"));
}

// add_special_tokens false: a completion's text without the tokenizer's BOS (the user's
// `"prompt": "hi", "add_special_tokens": false` counted it); true is the default.
TEST_F(PromptEncoderBos, ATextPromptWithoutSpecialTokensHasNoBos) {
  write(kWritesBos);
  EXPECT_EQ(text("hi", false), tokenizer_->encode("hi"));
  EXPECT_EQ(text("hi", true), after(testing::kBeginOfText, tokenizer_->encode("hi")));
  EXPECT_EQ(text("hi", true), text("hi"));
}

// add_special_tokens true on chat: vLLM encodes the rendered conversation with the tokenizer's
// special tokens, so its BOS goes in front of the template's text, and where the template wrote a
// BOS already the prompt starts with two, as vLLM's does (Hugging Face does not look).
TEST_F(PromptEncoderBos, AChatPromptWithSpecialTokensGetsTheTokenizersBosInFront) {
  write(kChatMl);  // the template writes no BOS
  const std::vector<int32_t> rendered = tokenizer_->encode("<|start_header_id|>hi<|eot_id|>");
  EXPECT_EQ(chat("hi", true), after(testing::kBeginOfText, rendered));
  EXPECT_EQ(chat("hi", false), rendered);
  EXPECT_EQ(chat("hi"), rendered);
  write(kWritesBos);  // the template writes one: a second in front
  EXPECT_EQ(chat("hi", true),
            after(testing::kBeginOfText, after(testing::kBeginOfText, tokenizer_->encode("hi"))));
  write(kChatMl, {{"add_bos_token", false}});  // a tokenizer that adds none adds none here
  EXPECT_EQ(chat("hi", true), rendered);
}

TEST_F(PromptEncoderBos, TokenIdsAreUsedAsGivenWhateverAddSpecialTokensSays) {
  write(kWritesBos);
  for (const std::optional<bool> add :
       {std::optional<bool>(), std::optional(true), std::optional(false)}) {
    GenerateInput input;
    input.prompt_kind = GenerateInput::PromptKind::kTokenIds;
    input.prompt_ids = {7, 8};
    input.add_special_tokens = add;
    EXPECT_EQ(encoder_->encode(input), (std::vector<int32_t>{7, 8}));
  }
}

}  // namespace
}  // namespace headway::serving
