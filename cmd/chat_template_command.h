// `headway chat-template --request FILE [--model DIR] [--template FILE]`: prints the prompt that a
// chat request makes, as `headway serve` renders it before tokenizing: the checkpoint's chat
// template (or the given .jinja file) applied to the request's messages, tools and
// chat_template_kwargs, add_generation_prompt and continue_final_message. For checking a template
// before serving it, and for comparing Headway's renderer with Jinja2
// (scripts/chat_template_sweep.py).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace headway::cmd {

struct ChatTemplateArgs {
  std::string request;  // a chat completions (or /tokenize) request body, "-" for stdin
  std::string model;    // checkpoint directory: its tokenizer and, without `template`, its template
  std::string template_file;  // a .jinja file used instead of the checkpoint's template
};

// Registers `chat-template` on `app`; `args` must outlive parsing. Main thread only.
CLI::App* add_chat_template_command(CLI::App& app, ChatTemplateArgs& args);

// Writes the prompt to stdout, as rendered (no newline added). Throws core::Error naming the file
// or request field at fault: an unreadable file, a body that is not a chat request, a template that
// does not load, or one that refuses the conversation (its raise_exception message). Main thread
// only.
int run_chat_template(const ChatTemplateArgs& args);

}  // namespace headway::cmd
