// Turns the JSON body of POST /v1/completions or /v1/chat/completions into a GenerateInput plus
// the response options (stream, include_usage, return_token_ids). It checks the wire format only
// (types, shapes, what Headway does not support); values such as temperature ranges and prompt
// length are the service's to check. docs/serving_http.md lists every field.
//
// Threading: pure functions, safe from any thread.
#pragma once

#include <headway/serving/generation_service.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tool_call_parser.h"

namespace headway::serving::http {

// OpenAI's limit on n; also the most choices (prompts × n) one request may ask for.
inline constexpr uint32_t kMaxChoices = 128;

struct OpenAiRequest {
  GenerateInput input;  // request_id set to a fresh "cmpl-..." / "chatcmpl-..." id
  // The answer's id when the client chose it (client_request_id.h): then input.request_id is it
  // with a random part after. Empty: the answer's id is the service's. `answer_id_field` names
  // where it came from ("request_id", "X-Request-Id") for refusals.
  std::string answer_id;
  std::string answer_id_field;
  // Names the answer `id`, which the client chose in `field`: answer_id, answer_id_field, and
  // input.request_id, the id the service then runs it under (service_request_id).
  void name_answer(std::string id, std::string field);
  // Choices to generate (OpenAI's n): each is a request of its own to the service, as in vLLM,
  // with seed + index as its seed.
  uint32_t n = 1;
  // A completions batch (prompt: ["a", "b"] or [[1, 2], [3]]): the prompts after the first (which
  // `input` holds), only their prompt fields set. Each prompt gets n choices, indexed
  // prompt * n + choice, as vLLM numbers them.
  std::vector<GenerateInput> more_prompts;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // vLLM's stream_options.continuous_usage_stats, with include_usage: every chunk carries the
  // usage so far.
  bool continuous_usage = false;
  // vLLM's extension: each choice (each stream chunk) also carries the generated "token_ids".
  bool return_token_ids = false;
  // Chat with tools and tool_choice "auto": the tool calls are parsed out of each answer's text
  // (with the server's [server] tool_call_parser; a request without one is refused).
  bool parse_tool_calls = false;
  bool parallel_tool_calls = true;  // false: at most one call per answer
  // tool_choice "required" or naming a function: the calls are forced by guided decoding
  // (input.guided) and read in this format, with or without the server's parser.
  std::optional<ToolCallFormat> forced_tool_format;
  std::string forced_function;
  // vLLM's include_reasoning: with a reasoning parser, false drops the thinking from the answer.
  bool include_reasoning = true;
  // vLLM's prompt_logprobs (-1: not asked): the most likely tokens listed beside each prompt
  // token in "prompt_logprobs" (each completions choice carries it; a chat answer, once).
  // input.sampling.prompt_logprobs is at least this (echo may ask for more).
  int32_t prompt_logprobs = -1;
  // Completions' echo: each choice's text, and its logprobs when asked, start with its prompt's.
  bool echo = false;
  // echo with max_tokens 0 (OpenAI's way to score a prompt): the choice is the prompt alone; one
  // token is generated (input.max_tokens is 1) and left out of the answer and its usage.
  bool echo_only = false;
  // Chat's echo (vLLM): the final message's text when that message is the assistant's (the role
  // of every answer; "" after another), which each choice's content then starts with, so that a
  // continued message (continue_final_message) comes back whole. nullopt: echo not asked.
  std::optional<std::string> chat_echo;
};

// Throw ApiError 400 naming the field at fault. `model` supplies the chat default for max_tokens.
OpenAiRequest parse_completion_request(std::string_view body);
OpenAiRequest parse_chat_request(std::string_view body);

// vLLM's POST /tokenize: one completions prompt (text or token ids) or chat messages
// (add_generation_prompt, continue_final_message and chat_template_kwargs as for a chat request),
// with add_special_tokens as for the request of that form. Only the model and prompt fields of the
// result are set.
GenerateInput parse_tokenize_request(std::string_view body);
// vLLM's POST /detokenize: {"tokens": [ids]}, and the optional model (into `model`).
std::vector<int32_t> parse_detokenize_request(std::string_view body, std::string& model);

}  // namespace headway::serving::http
