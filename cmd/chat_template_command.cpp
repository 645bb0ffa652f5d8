#include "chat_template_command.h"

#include <headway/core/byte_tokenizer.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <headway/core/tokenizer.h>
#include <headway/serving/chat_request.h>
#include <headway/serving/chat_template.h>
#include <headway/serving/service_error.h>

#include <iostream>
#include <iterator>
#include <memory>

namespace headway::cmd {

CLI::App* add_chat_template_command(CLI::App& app, ChatTemplateArgs& args) {
  CLI::App* c = app.add_subcommand(
      "chat-template",
      "Print the prompt a chat request makes: the chat template applied to its messages, tools "
      "and chat_template_kwargs, as `serve` renders it");
  c->add_option("--request", args.request,
                "A chat completions request body (JSON with messages, and optionally tools and "
                "chat_template_kwargs); - reads standard input")
      ->required();
  c->add_option("--model", args.model,
                "Checkpoint directory: its tokenizer gives bos_token and eos_token, and its chat "
                "template is used unless --template is given");
  c->add_option("--template", args.template_file,
                "A .jinja chat template to use instead of the checkpoint's; without --model, "
                "bos_token and eos_token render as empty text");
  return c;
}

namespace {

// What `read` returns; its error prefixed with the flag whose value it read ("--model: 1: no such
// directory"), since a bare path does not say which of three flags gave it (helper-150's fuzzer).
template <typename Read>
auto from_flag(const char* flag, Read read) {
  try {
    return read();
  } catch (const core::Error& e) {
    throw core::Error(std::string(flag) + ": " + e.what());
  }
}

}  // namespace

int run_chat_template(const ChatTemplateArgs& args) {
  if (args.model.empty() && args.template_file.empty()) {
    throw core::Error("chat-template needs --model, --template or both");
  }
  const std::string body = from_flag("--request", [&] {
    return args.request == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {})
                               : core::read_text_file(args.request);
  });
  serving::GenerateInput input;
  try {
    input = serving::http::parse_chat_request_prompt(body);
  } catch (const core::Error& e) {
    throw core::Error("--request " +
                      (args.request == "-" ? std::string("standard input") : args.request) + ": " +
                      e.what());
  }
  // Without a checkpoint, a byte tokenizer with no special tokens: the template's bos_token and
  // eos_token are empty, as they are for the built-in byte tokenizer when serving.
  const std::unique_ptr<core::Tokenizer> tokenizer =
      args.model.empty() ? std::make_unique<core::ByteTokenizer>(0, -1, -1, 256)
                         : from_flag("--model", [&] { return core::Tokenizer::load(args.model); });
  const std::unique_ptr<serving::ChatTemplate> chat_template =
      args.template_file.empty()
          ? from_flag("--model",
                      [&] { return serving::ChatTemplate::load(args.model, *tokenizer); })
          : from_flag("--template", [&] {
              return serving::ChatTemplate::from_file(args.template_file, *tokenizer);
            });
  try {
    std::cout << chat_template->render(input);
  } catch (const serving::ServiceError& e) {
    // A failure names the template and its line; a refusal is the template's own message.
    throw core::Error(e.what());
  }
  std::cout.flush();
  return 0;
}

}  // namespace headway::cmd
