// Turns a request's prompt into token ids: text with BOS prepended where the tokenizer adds one;
// chat messages rendered with the checkpoint's chat template and encoded, with the BOS the template
// writes; token ids as given. GenerateInput::add_special_tokens, as vLLM's, leaves out the text's
// BOS (false) or adds the tokenizer's BOS before the chat template's (true, so two where the
// template writes one, as vLLM gives).
//
// Ownership: shares the tokenizer; owns the chat template. Threading: encode() is const and safe
// to call concurrently (tokenizer and template are immutable).
#pragma once

#include <headway/core/tokenizer.h>
#include <headway/serving/generation_service.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving {

class ChatTemplate;

class PromptEncoder {
 public:
  // `tokenizer` may be null (token-id prompts only). The chat template is read from
  // `checkpoint_dir`; when there is none, chat requests are refused with the reason.
  PromptEncoder(std::shared_ptr<const core::Tokenizer> tokenizer,
                const std::filesystem::path& checkpoint_dir);
  ~PromptEncoder();

  // Throws ServiceError(kInvalidArgument) when the form needs what the model lacks, or when
  // rendering fails (the message says which message was at fault).
  std::vector<int32_t> encode(const GenerateInput& input) const;

  // What the chat template writes to open the assistant's answer (add_generation_prompt: Qwen's
  // "<|im_start|>assistant\n", DeepSeek's "<｜Assistant｜>"), encoded: the tokens of a rendering of
  // one user message with it, from where they part from the rendering without it (a system
  // message added for a template that refuses a lone user message). Empty when there is no
  // template or neither conversation renders.
  std::vector<int32_t> generation_prompt() const;

 private:
  std::vector<int32_t> with_bos(std::vector<int32_t> ids) const;
  std::vector<int32_t> text_prompt(std::string_view text, bool add_special_tokens) const;
  std::vector<int32_t> chat_prompt(const std::string& rendered, bool add_special_tokens) const;
  std::shared_ptr<const core::Tokenizer> tokenizer_;
  std::shared_ptr<const ChatTemplate> chat_template_;
  std::string no_chat_template_;  // why chat_template_ is null
};

}  // namespace headway::serving
