// Chat templates: a conversation (ChatMessage list) -> the prompt text a chat model was trained on.
//
// Hugging Face checkpoints ship their template as Jinja (tokenizer_config.json "chat_template", or
// chat_template.jinja beside it). Headway runs it with its own small interpreter of the Jinja
// subset such templates use (Llama 3.x, Qwen 2.5/3/3-Coder, Mistral, DeepSeek, Gemma, gpt-oss,
// Hermes, ...): output, if/elif/else, for with loop.*, break/continue, set (also as a block) and
// namespace(), macros, filter blocks, the usual operators, filters (trim, length, tojson, join,
// sort, ...), tests (defined, none, ...), string and dict methods, raise_exception, strftime_now.
// docs/serving_text.md lists it all and how it was compared with Jinja2. The template is parsed at
// load time, and what Jinja2 would refuse to compile, or has and the interpreter lacks, is an error
// then (naming the file, the line and the construct), never a silently wrong prompt; names neither
// knows fail where Jinja2 fails them, when the line runs. Rendering follows Hugging Face's
// apply_chat_template: trim_blocks and lstrip_blocks on; variables messages (each with role and
// content, and the fields of ChatMessage::fields_json), bos_token, eos_token (the tokenizer's
// special_token_text), add_generation_prompt, tools (GenerateInput::tools_json, or none),
// documents (none), and the request's chat_template_kwargs.
//
// The prompt has the BOS its template writes (bos_token's text encodes to bos()); callers add
// bos() only where the tokenizer has no special-token text, so bos_token rendered empty.
//
// Ownership: a ChatTemplate owns its parsed template and copies the special tokens' text; it keeps
// no reference to the tokenizer. Threading: render() is const and safe to call concurrently.
#pragma once

#include <headway/core/tokenizer.h>
#include <headway/serving/generation_service.h>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace headway::serving {

class ChatTemplate {
 public:
  // The checkpoint's template: chat_template.jinja when present, else tokenizer_config.json's
  // "chat_template" (a string, or a list of {name, template} of which "default" is used), else the
  // built-in Llama 3 template where the tokenizer has its markers (or is the byte tokenizer), else
  // throws core::Error; also naming the file, line and construct of a malformed template.
  static std::unique_ptr<ChatTemplate> load(const std::filesystem::path& checkpoint_dir,
                                            const core::Tokenizer& tokenizer);
  // A template file given on its own (e.g. `--chat-template file.jinja`). Throws as load().
  static std::unique_ptr<ChatTemplate> from_file(const std::filesystem::path& jinja_file,
                                                 const core::Tokenizer& tokenizer);
  // Template source given as text; `origin` names it in errors. Throws as load().
  static std::unique_ptr<ChatTemplate> from_string(const std::string& source,
                                                   const std::string& origin,
                                                   const core::Tokenizer& tokenizer);
  // Meta's Llama 3 Instruct template, used when a checkpoint ships none.
  static const std::string& builtin_llama3_source();

  ~ChatTemplate();

  // The prompt for `messages`, ending with the assistant header when add_generation_prompt;
  // `tools_json`: a JSON array, or empty for none. Throws ServiceError(kInvalidArgument, param
  // "messages") when the template refuses the conversation (raise_exception: its message) or
  // fails on it (the line and what failed), and naming the field when a message's fields_json is
  // not a JSON object or tools_json not an array.
  // `template_kwargs_json`: more variables (vLLM's chat_template_kwargs), a JSON object or empty;
  // one that names a variable above is refused naming it.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::string_view tools_json = {},
                     std::string_view template_kwargs_json = {}) const;

  // The prompt of a chat request (GenerateInput::PromptKind::kChat): its messages, tools and
  // chat_template_kwargs rendered with its add_generation_prompt, then, with
  // continue_final_message, cut after the final message. Throws as render() and
  // cut_after_final_message().
  std::string render(const GenerateInput& input) const;

  // Hugging Face's continue_final_message, which vLLM's follows: `rendered`, the conversation
  // rendered without a generation prompt, cut right after the final message's content (its
  // trailing whitespace kept when the template kept it), so that the model goes on writing that
  // message. Throws ServiceError(kInvalidArgument, param "messages") when the rendered text does
  // not contain that content (a template that rewrites it).
  static std::string cut_after_final_message(std::string_view rendered,
                                             std::string_view final_content);

  // Where the template came from ("<dir>/tokenizer_config.json (chat_template)", a file, or
  // "built-in Llama 3 template"), for logs and errors.
  const std::string& origin() const;

  struct Parsed;  // defined in chat_template.cpp

 private:
  explicit ChatTemplate(std::unique_ptr<const Parsed> parsed);
  std::unique_ptr<const Parsed> parsed_;
};

}  // namespace headway::serving
