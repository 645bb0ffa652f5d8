#include "prompt_encoder.h"

#include <headway/core/error.h>
#include <headway/serving/chat_template.h>

#include <algorithm>

namespace headway::serving {

PromptEncoder::PromptEncoder(std::shared_ptr<const core::Tokenizer> tokenizer,
                             const std::filesystem::path& checkpoint_dir)
    : tokenizer_(std::move(tokenizer)) {
  if (tokenizer_ == nullptr) {
    no_chat_template_ = "this model has no tokenizer: send prompt token ids";
    return;
  }
  try {
    chat_template_ = ChatTemplate::load(checkpoint_dir, *tokenizer_);
  } catch (const core::Error& e) {
    no_chat_template_ = std::string("this model has no usable chat template: ") + e.what();
  }
}

PromptEncoder::~PromptEncoder() = default;

std::vector<int32_t> PromptEncoder::with_bos(std::vector<int32_t> ids) const {
  const int32_t bos = tokenizer_->bos();
  if (bos >= 0 && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

std::vector<int32_t> PromptEncoder::text_prompt(std::string_view text,
                                                bool add_special_tokens) const {
  std::vector<int32_t> ids = tokenizer_->encode(text);
  return add_special_tokens && tokenizer_->adds_bos() ? with_bos(std::move(ids)) : ids;
}

std::vector<int32_t> PromptEncoder::chat_prompt(const std::string& rendered,
                                                bool add_special_tokens) const {
  std::vector<int32_t> ids = tokenizer_->encode(rendered);
  // As vLLM (add_special_tokens false for chat): the template writes the BOS where the model
  // wants one. Only a tokenizer that cannot read the BOS's text back (SentencePiece, byte) had
  // bos_token rendered empty, and gets bos() here instead.
  const int32_t bos = tokenizer_->bos();
  if (bos >= 0 && tokenizer_->special_token_text(bos).empty()) ids = with_bos(std::move(ids));
  // add_special_tokens true: vLLM encodes the rendered text as a completion's, so the tokenizer's
  // BOS goes first even where the template wrote one (Hugging Face does not look), and the prompt
  // then starts with two.
  if (add_special_tokens && tokenizer_->adds_bos()) ids.insert(ids.begin(), bos);
  return ids;
}

std::vector<int32_t> PromptEncoder::generation_prompt() const {
  if (chat_template_ == nullptr) return {};
  // A template may refuse a lone user message (wanting a system message first): one of each then.
  const std::vector<std::vector<ChatMessage>> conversations = {
      {{"user", "Hi.", ""}}, {{"system", "Be brief.", ""}, {"user", "Hi.", ""}}};
  for (const std::vector<ChatMessage>& messages : conversations) {
    try {
      const std::vector<int32_t> with = tokenizer_->encode(chat_template_->render(messages, true));
      const std::vector<int32_t> without =
          tokenizer_->encode(chat_template_->render(messages, false));
      // Compared as tokens, from where they part: a template may also write something in place
      // of the generation prompt (Phi-3's eos_token), not only leave it out.
      const auto parted = std::mismatch(with.begin(), with.end(), without.begin(), without.end());
      return std::vector<int32_t>(parted.first, with.end());
    } catch (const std::exception&) {
      continue;
    }
  }
  return {};  // no conversation renders: no role markers from the template
}

std::vector<int32_t> PromptEncoder::encode(const GenerateInput& input) const {
  using Kind = GenerateInput::PromptKind;
  if (input.prompt_kind == Kind::kTokenIds) return input.prompt_ids;
  if (tokenizer_ == nullptr) {
    // A chat's fault is its messages; a text prompt's, the prompt.
    throw ServiceError(ErrorCode::kInvalidArgument,
                       "this model has no tokenizer: send prompt token ids",
                       input.prompt_kind == Kind::kText ? "prompt" : "messages");
  }
  if (input.prompt_kind == Kind::kText) {
    return text_prompt(input.prompt_text, input.add_special_tokens.value_or(true));
  }
  if (chat_template_ == nullptr) {
    throw ServiceError(ErrorCode::kInvalidArgument, no_chat_template_, "messages");
  }
  std::string rendered;
  try {
    rendered = chat_template_->render(input);
  } catch (const core::Error& e) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       std::string("the chat template failed on these messages: ") + e.what(),
                       "messages");
  }
  return chat_prompt(rendered, input.add_special_tokens.value_or(false));
}

}  // namespace headway::serving
