#include "openai_request.h"

#include <fmt/format.h>
#include <headway/core/error.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "api_error.h"
#include "client_request_id.h"
#include "headway/serving/chat_request.h"
#include "headway/serving/echoed_input.h"
#include "headway/serving/json_text.h"
#include "headway/serving/random_bits.h"
#include "json_fields.h"
#include "openai_guided.h"
#include "openai_tools.h"

namespace headway::serving::http {
namespace {

constexpr int64_t kMaxTokensLimit = std::numeric_limits<uint32_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr uint32_t kCompletionDefaultMaxTokens = 16;  // OpenAI's and vLLM's default

// Fields Headway does not implement: allowed only at their default ("not set") values, so clients
// that always send them keep working while a request that depends on them is refused.
void refuse_unsupported(const FieldReader& fields) {
  // vLLM extensions that constrain or reshape the output: a client that sends them relies on
  // them, and ignoring them (as unknown fields are) would hand it unconstrained text.
  for (const char* field : {"logits_processors"}) {
    if (is_set(fields.find(field))) throw not_supported(field, field);
  }
}

// vLLM's prompt_logprobs, as vLLM takes it: an integer, -1 for the whole vocabulary (more than
// this server lists: refused as vLLM refuses it past its max_logprobs), never with a stream.
void parse_prompt_logprobs(const FieldReader& fields, OpenAiRequest& out) {
  const std::optional<int64_t> asked = fields.integer("prompt_logprobs", -1, core::kMaxLogprobs);
  if (!asked) return;
  if (*asked < 0) {
    throw invalid_field("prompt_logprobs",
                        fmt::format("prompt_logprobs -1 (the whole vocabulary) is more than this "
                                    "server lists: at most {} most likely tokens per position",
                                    core::kMaxLogprobs));
  }
  if (out.stream) {
    // vLLM refuses it above 0 and drops it silently at 0; a stream has no place for it.
    throw invalid_field("prompt_logprobs",
                        "prompt_logprobs are not available when \"stream\" is true");
  }
  out.prompt_logprobs = static_cast<int32_t>(*asked);
  out.input.sampling.prompt_logprobs = out.prompt_logprobs;
}

// vLLM's bad_words: an array of strings (the service encodes them with the model's tokenizer).
std::vector<std::string> parse_bad_words(const FieldReader& fields) {
  const nlohmann::json* words = fields.find("bad_words");
  if (words == nullptr || words->is_null()) return {};
  if (!words->is_array()) {
    throw invalid_field("bad_words", std::string("bad_words must be an array of strings, not ") +
                                         json_kind(*words));
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < words->size(); ++i) {
    const nlohmann::json& word = (*words)[i];
    if (!word.is_string()) {
      const std::string name = "bad_words[" + std::to_string(i) + "]";
      throw invalid_field(name, name + " must be a string, not " + json_kind(word));
    }
    out.push_back(word.get<std::string>());
  }
  return out;
}

std::vector<std::string> parse_stop(const FieldReader& fields) {
  const nlohmann::json* stop = fields.find("stop");
  if (stop == nullptr) return {};
  std::vector<std::string> out;
  if (stop->is_string()) {
    out.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (size_t i = 0; i < stop->size(); ++i) {
      const auto& item = (*stop)[i];
      const std::string name = "stop[" + std::to_string(i) + "]";
      if (!item.is_string()) {
        throw invalid_field(name, name + " must be a string, not " + json_kind(item));
      }
      out.push_back(item.get<std::string>());
    }
  } else {
    throw invalid_field("stop", std::string("stop must be a string or an array of strings, not ") +
                                    json_kind(*stop));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    // An empty stop string would match before the first token.
    if (out[i].empty()) {
      const std::string name = stop->is_array() ? "stop[" + std::to_string(i) + "]" : "stop";
      throw invalid_field(name, name + " must not be empty");
    }
  }
  return out;
}

std::vector<int32_t> parse_token_ids(const nlohmann::json& array, const std::string& name) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const auto& item = array[i];
    const std::string item_name = name + "[" + std::to_string(i) + "]";
    if (!item.is_number_integer()) {
      throw invalid_field(item_name,
                          item_name + " must be a token id (an integer), not " + json_kind(item));
    }
    if (item.is_number_unsigned() ? item.get<uint64_t>() > static_cast<uint64_t>(kInt32Max)
                                  : item.get<int64_t>() < 0 || item.get<int64_t>() > kInt32Max) {
      throw invalid_field(item_name, item_name + " is not a valid token id: " + item.dump());
    }
    ids.push_back(static_cast<int32_t>(item.get<int64_t>()));
  }
  return ids;
}

// OpenAI's logit_bias: an object from token ids (decimal strings) to biases. The service checks
// the ids against the vocabulary and the biases against [-100, 100].
std::vector<std::pair<int32_t, float>> parse_logit_bias(const FieldReader& fields) {
  const nlohmann::json* bias = fields.find("logit_bias");
  if (bias == nullptr) return {};
  if (!bias->is_object()) {
    throw invalid_field("logit_bias", std::string("logit_bias must be an object from token ids to "
                                                  "biases, not ") +
                                          json_kind(*bias));
  }
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(bias->size());
  const FieldReader entries(*bias, "logit_bias");
  for (const auto& [key, value] : bias->items()) {
    int32_t id = -1;
    const char* end = key.data() + key.size();
    const auto [stop, error] = std::from_chars(key.data(), end, id);
    if (key.empty() || error != std::errc() || stop != end || id < 0) {
      throw invalid_field(
          entries.name(key),
          fmt::format("logit_bias key {} is not a token id (a decimal integer)", quote_input(key)));
    }
    if (value.is_null()) continue;
    out.emplace_back(id, *entries.number(key));
  }
  return out;
}

// vLLM's request_id field: the answer's id is `prefix` and it (docs/serving_http.md, "Request
// ids"); the X-Request-Id header, which the routes read, wins over it.
void take_client_request_id(const FieldReader& fields, std::string_view prefix,
                            OpenAiRequest& out) {
  if (auto id = fields.string("request_id")) {
    check_client_request_id(*id, "request_id");
    out.name_answer(std::string(prefix) + *id, "request_id");
  }
}

// Fields shared by both endpoints: model, sampling, stop, priority, class, streaming.
void parse_common(const FieldReader& fields, OpenAiRequest& out) {
  refuse_unsupported(fields);
  GenerateInput& input = out.input;
  input.model = fields.string("model").value_or("");

  core::SamplingParams& sampling = input.sampling;
  sampling.temperature = fields.number("temperature").value_or(1.0f);  // OpenAI's default
  sampling.top_p = fields.number("top_p", /*zero_allowed=*/false).value_or(1.0f);
  // vLLM takes -1 (and 0) for "no top-k".
  const int64_t top_k = fields.integer("top_k", -1, kMaxTokensLimit).value_or(0);
  sampling.top_k = top_k < 0 ? 0 : static_cast<uint32_t>(top_k);
  sampling.min_p = fields.number("min_p").value_or(0.0f);
  // Without a seed every request must still sample differently, as with OpenAI and vLLM.
  sampling.seed = fields.bits64("seed").value_or(random_u64());
  sampling.ignore_eos = fields.boolean("ignore_eos").value_or(false);
  sampling.presence_penalty = fields.number("presence_penalty").value_or(0.0f);
  sampling.frequency_penalty = fields.number("frequency_penalty").value_or(0.0f);
  sampling.repetition_penalty =
      fields.number("repetition_penalty", /*zero_allowed=*/false).value_or(1.0f);
  sampling.min_tokens =
      static_cast<uint32_t>(fields.integer("min_tokens", 0, kMaxTokensLimit).value_or(0));
  sampling.logit_bias = parse_logit_bias(fields);
  for (const auto& [name, into] : {std::pair{"stop_token_ids", &sampling.stop_token_ids},
                                   std::pair{"allowed_token_ids", &sampling.allowed_token_ids}}) {
    const nlohmann::json* ids = fields.find(name);
    if (ids == nullptr) continue;
    if (!ids->is_array()) {
      throw invalid_field(
          name, std::string(name) + " must be an array of token ids, not " + json_kind(*ids));
    }
    *into = parse_token_ids(*ids, name);
  }
  input.bad_words = parse_bad_words(fields);
  input.stop = parse_stop(fields);
  input.include_stop_str_in_output = fields.boolean("include_stop_str_in_output").value_or(false);
  input.skip_special_tokens = fields.boolean("skip_special_tokens").value_or(true);
  input.priority =
      static_cast<int32_t>(fields.integer("priority", kInt32Min, kInt32Max).value_or(0));
  input.request_class = fields.string("request_class").value_or("");
  // The service checks the value against the model's max_model_len.
  if (auto truncate = fields.integer("truncate_prompt_tokens", kInt32Min, kInt32Max)) {
    input.truncate_prompt_tokens = static_cast<int32_t>(*truncate);
  }

  out.n = static_cast<uint32_t>(fields.integer("n", 1, kMaxChoices).value_or(1));
  out.stream = fields.boolean("stream").value_or(false);
  out.return_token_ids = fields.boolean("return_token_ids").value_or(false);
  input.return_prompt_ids = out.return_token_ids;  // vLLM returns the prompt's ids with them
  if (const nlohmann::json* options = fields.find("stream_options")) {
    if (!options->is_object()) {
      throw invalid_field("stream_options", std::string("stream_options must be an object, not ") +
                                                json_kind(*options));
    }
    if (!out.stream) {
      throw invalid_field("stream_options", "stream_options is only allowed with \"stream\": true");
    }
    const FieldReader stream_options(*options, "stream_options");
    out.include_usage = stream_options.boolean("include_usage").value_or(false);
    out.continuous_usage =
        out.include_usage && stream_options.boolean("continuous_usage_stats").value_or(false);
  }
  parse_prompt_logprobs(fields, out);
}

// One prompt of a batch (prompt[i]): a string or a non-empty array of token ids.
void parse_batch_prompt(const nlohmann::json& item, const std::string& name, GenerateInput& input) {
  if (item.is_string()) {
    input.prompt_kind = GenerateInput::PromptKind::kText;
    input.prompt_text = item.get<std::string>();
  } else if (item.is_array()) {
    if (item.empty()) throw invalid_field(name, name + " must not be an empty array");
    input.prompt_kind = GenerateInput::PromptKind::kTokenIds;
    input.prompt_ids = parse_token_ids(item, name);
  } else {
    throw invalid_field(name, name + " must be a string or token ids, not " + json_kind(item));
  }
}

void parse_prompt(const FieldReader& fields, OpenAiRequest& out) {
  GenerateInput& input = out.input;
  // vLLM's, default true: the tokenizer's BOS before a text prompt (ids are used as given).
  input.add_special_tokens = fields.boolean("add_special_tokens");
  const nlohmann::json* prompt = fields.find("prompt");
  if (prompt == nullptr) throw invalid_field("prompt", "prompt is required");
  if (prompt->is_string()) {
    input.prompt_kind = GenerateInput::PromptKind::kText;
    input.prompt_text = prompt->get<std::string>();
    return;
  }
  if (!prompt->is_array()) {
    throw invalid_field(
        "prompt",
        std::string("prompt must be a string or an array of token ids, not ") + json_kind(*prompt));
  }
  if (prompt->empty()) throw invalid_field("prompt", "prompt must not be an empty array");
  const auto& first = prompt->front();
  if (first.is_number()) {
    input.prompt_kind = GenerateInput::PromptKind::kTokenIds;
    input.prompt_ids = parse_token_ids(*prompt, "prompt");
    return;
  }
  // A batch of prompts: ["a", "b"] or [[1, 2], [3]]. A batch of one is the same as its prompt.
  if (prompt->size() > kMaxChoices) {
    throw invalid_field("prompt", "a batch of " + std::to_string(prompt->size()) +
                                      " prompts is over the limit of " +
                                      std::to_string(kMaxChoices));
  }
  parse_batch_prompt(first, "prompt[0]", input);
  for (size_t i = 1; i < prompt->size(); ++i) {
    out.more_prompts.emplace_back();
    parse_batch_prompt((*prompt)[i], "prompt[" + std::to_string(i) + "]", out.more_prompts.back());
  }
}

std::string parse_content(const nlohmann::json& message, const std::string& path,
                          const std::string& role) {
  const std::string name = path + ".content";
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    // An assistant turn may carry no text (it made tool calls in the original conversation).
    if (role == "assistant") return {};
    throw invalid_field(name, name + " is required");
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    throw invalid_field(
        name, name + " must be a string or an array of content parts, not " + json_kind(*it));
  }
  std::string text;
  for (size_t j = 0; j < it->size(); ++j) {
    const auto& part = (*it)[j];
    const std::string part_name = name + "[" + std::to_string(j) + "]";
    if (!part.is_object()) {
      throw invalid_field(part_name, part_name + " must be an object, not " + json_kind(part));
    }
    FieldReader part_fields(part, part_name);
    const auto type = part_fields.string("type");
    if (!type)
      throw invalid_field(part_fields.name("type"), part_fields.name("type") + " is required");
    if (*type != "text") {
      throw not_supported(part_fields.name("type"),
                          "content part type " + quote_input(*type) + " (only \"text\")");
    }
    const auto part_text = part_fields.string("text");
    if (!part_text)
      throw invalid_field(part_fields.name("text"), part_fields.name("text") + " is required");
    // Parts are joined by newlines, as vLLM renders them.
    if (j > 0) text += '\n';
    text += *part_text;
  }
  return text;
}

// `ordered`: the body in the client's key order, parsed when it has JSON for the template.
std::vector<ChatMessage> parse_messages(const FieldReader& fields,
                                        const nlohmann::ordered_json& ordered) {
  const nlohmann::json* messages = fields.find("messages");
  if (messages == nullptr) throw invalid_field("messages", "messages is required");
  if (!messages->is_array()) {
    throw invalid_field("messages",
                        std::string("messages must be an array, not ") + json_kind(*messages));
  }
  if (messages->empty()) throw invalid_field("messages", "messages must not be empty");
  std::vector<ChatMessage> out;
  out.reserve(messages->size());
  for (size_t i = 0; i < messages->size(); ++i) {
    const auto& message = (*messages)[i];
    const std::string path = "messages[" + std::to_string(i) + "]";
    if (!message.is_object()) {
      throw invalid_field(path, path + " must be an object, not " + json_kind(message));
    }
    FieldReader message_fields(message, path);
    auto role = message_fields.string("role");
    if (!role) throw invalid_field(path + ".role", path + ".role is required");
    if (*role == "developer") role = "system";  // OpenAI's newer name for the system turn
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
      throw invalid_field(path + ".role",
                          path + ".role " + quote_input(*role) +
                              " is not supported; use system, developer, user, assistant or tool");
    }
    std::string content = parse_content(message, path, *role);
    static const nlohmann::ordered_json kNone;
    std::string fields_json = parse_message_fields(
        message, ordered.is_object() ? ordered.at("messages").at(i) : kNone, path, *role);
    out.push_back({*role, std::move(content), std::move(fields_json)});
  }
  return out;
}

// Whether the body has fields whose JSON goes to the template as the client wrote it (tools, an
// earlier turn's tool calls, chat_template_kwargs).
bool has_template_json(const nlohmann::json& body) {
  if (body.contains("tools") || body.contains("chat_template_kwargs")) return true;
  const auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return false;
  for (const auto& message : *messages) {
    if (message.is_object() && message.contains("tool_calls")) return true;
  }
  return false;
}

// vLLM's options for rendering chat messages, at anything but their defaults.
void parse_template_options(const FieldReader& fields, GenerateInput& input) {
  // A client that sends its own template relies on it: the prompt would silently be another.
  if (is_set(fields.find("chat_template"))) throw not_supported("chat_template", "chat_template");
  input.add_generation_prompt = fields.boolean("add_generation_prompt").value_or(true);
  input.continue_final_message = fields.boolean("continue_final_message").value_or(false);
  if (input.add_generation_prompt && input.continue_final_message) {
    // vLLM's rule: a client continuing the final message says so with both fields.
    throw invalid_field("continue_final_message",
                        "continue_final_message needs add_generation_prompt set to false");
  }
}

// A chat prompt: the messages, the tools and the template options, into `input`.
ToolRequest parse_chat_prompt(const nlohmann::json& json, std::string_view body,
                              GenerateInput& input) {
  const FieldReader fields(json, "");
  const nlohmann::ordered_json ordered =
      has_template_json(json) ? parse_json_keeping_order(body) : nlohmann::ordered_json();
  input.prompt_kind = GenerateInput::PromptKind::kChat;
  input.messages = parse_messages(fields, ordered);
  parse_template_options(fields, input);
  // vLLM's, default false: true adds the tokenizer's BOS before the template's text.
  input.add_special_tokens = fields.boolean("add_special_tokens");
  ToolRequest tools = parse_tool_request(fields, ordered);
  input.tools_json = tools.tools_json;
  // vLLM's extra template variables (Qwen3's enable_thinking): the service refuses one that
  // names a variable the request sets itself.
  if (const nlohmann::json* kwargs = fields.find("chat_template_kwargs")) {
    if (!kwargs->is_object()) {
      throw invalid_field("chat_template_kwargs", std::string("chat_template_kwargs must be an "
                                                              "object, not ") +
                                                      json_kind(*kwargs));
    }
    if (!kwargs->empty()) input.template_kwargs_json = ordered.at("chat_template_kwargs").dump();
  }
  return tools;
}

}  // namespace

GenerateInput parse_chat_request_prompt(std::string_view body) {
  try {
    const nlohmann::json json = parse_body(body);
    const FieldReader fields(json, "");
    if (fields.find("messages") == nullptr) throw invalid_field("messages", "messages is required");
    GenerateInput input;
    input.model = fields.string("model").value_or("");
    parse_chat_prompt(json, body, input);
    return input;
  } catch (const ApiError& e) {
    throw core::Error(e.what());
  }
}

GenerateInput parse_tokenize_request(std::string_view body) {
  const nlohmann::json json = parse_body(body);
  const FieldReader fields(json, "");
  OpenAiRequest out;
  out.input.model = fields.string("model").value_or("");
  // vLLM answers each token's text with it; silence would look like an empty answer.
  if (fields.boolean("return_token_strs").value_or(false)) {
    throw not_supported("return_token_strs", "return_token_strs");
  }
  if (fields.find("messages") != nullptr) {
    if (fields.find("prompt") != nullptr) {
      throw invalid_field("prompt", "give either prompt or messages, not both");
    }
    parse_chat_prompt(json, body, out.input);
    return std::move(out.input);
  }
  parse_prompt(fields, out);
  if (!out.more_prompts.empty()) {
    throw invalid_field("prompt", "tokenize takes one prompt, not a batch");
  }
  return std::move(out.input);
}

std::vector<int32_t> parse_detokenize_request(std::string_view body, std::string& model) {
  const nlohmann::json json = parse_body(body);
  const FieldReader fields(json, "");
  model = fields.string("model").value_or("");
  const nlohmann::json* tokens = fields.find("tokens");
  if (tokens == nullptr) throw invalid_field("tokens", "tokens is required");
  if (!tokens->is_array()) {
    throw invalid_field(
        "tokens", std::string("tokens must be an array of token ids, not ") + json_kind(*tokens));
  }
  return parse_token_ids(*tokens, "tokens");
}

OpenAiRequest parse_completion_request(std::string_view body) {
  const nlohmann::json json = parse_body(body);
  const FieldReader fields(json, "");
  OpenAiRequest out;
  out.input.request_id = random_request_id("cmpl-");
  parse_common(fields, out);
  take_client_request_id(fields, "cmpl-", out);
  parse_prompt(fields, out);
  const size_t choices = out.n * (out.more_prompts.size() + 1);
  if (choices > kMaxChoices) {
    throw invalid_field("n", fmt::format("n = {} for each of {} prompts is {} choices, over the "
                                         "limit of {} per request",
                                         out.n, out.more_prompts.size() + 1, choices, kMaxChoices));
  }
  out.echo = fields.boolean("echo").value_or(false);
  if (out.echo && out.input.truncate_prompt_tokens) {
    // The text echoed would be the prompt as sent, not the tokens kept.
    throw not_supported("echo", "echo with truncate_prompt_tokens");
  }
  // max_tokens 0 asks for the prompt alone, which only echo gives.
  out.input.max_tokens =
      static_cast<uint32_t>(fields.integer("max_tokens", out.echo ? 0 : 1, kMaxTokensLimit)
                                .value_or(kCompletionDefaultMaxTokens));
  if (out.input.max_tokens == 0) {
    out.echo_only = true;
    out.input.max_tokens = 1;
  }

  // An integer: the most likely tokens to list beside each generated one (OpenAI allows 5, vLLM
  // its max_logprobs, 20 by default).
  if (auto logprobs = fields.integer("logprobs", 0, core::kMaxLogprobs)) {
    out.input.sampling.logprobs = static_cast<int32_t>(*logprobs);
  }
  // Echoed logprobs list the prompt's tokens as the generated ones (vLLM: prompt_logprobs are
  // logprobs unless set).
  if (out.echo && out.input.sampling.logprobs >= 0) {
    out.input.sampling.prompt_logprobs =
        std::max(out.input.sampling.prompt_logprobs, out.input.sampling.logprobs);
  }
  if (auto best_of = fields.integer("best_of", 0, kMaxTokensLimit); best_of && *best_of != 1) {
    throw not_supported("best_of", "best_of");
  }
  if (auto suffix = fields.string("suffix"); suffix && !suffix->empty()) {
    throw not_supported("suffix", "suffix");
  }
  out.input.guided = parse_guided_output(json, body);
  return out;
}

OpenAiRequest parse_chat_request(std::string_view body) {
  const nlohmann::json json = parse_body(body);
  const FieldReader fields(json, "");
  OpenAiRequest out;
  out.input.request_id = random_request_id("chatcmpl-");
  parse_common(fields, out);
  take_client_request_id(fields, "chatcmpl-", out);
  out.input.guided = parse_guided_output(json, body);
  const ToolRequest tools = parse_chat_prompt(json, body, out.input);
  out.parse_tool_calls = tools.parse_calls;
  out.parallel_tool_calls = tools.parallel_calls;
  out.forced_tool_format = tools.forced_format;
  out.forced_function = tools.function;
  if (tools.guided.kind != GuidedOutput::Kind::kNone) {
    if (out.input.guided.kind != GuidedOutput::Kind::kNone) {
      throw invalid_field("tool_choice",
                          "a forced tool_choice (\"required\" or a named "
                          "function) cannot be combined with " +
                              out.input.guided.field + ": both would shape the same answer");
    }
    out.input.guided = tools.guided;
  }
  out.include_reasoning = fields.boolean("include_reasoning").value_or(true);

  // max_completion_tokens replaced max_tokens in OpenAI's chat API; either is honoured. Without
  // either, the completion may run to the end of the context: the service bounds it there.
  auto max_tokens = fields.integer("max_completion_tokens", 1, kMaxTokensLimit);
  if (max_tokens) {
    out.input.max_tokens_field = "max_completion_tokens";  // what a refusal names
  } else {
    max_tokens = fields.integer("max_tokens", 1, kMaxTokensLimit);
  }
  if (max_tokens) {
    out.input.max_tokens = static_cast<uint32_t>(*max_tokens);
  } else {
    out.input.max_tokens_to_context_end = true;
  }

  // A boolean, and the count of most likely tokens apart (OpenAI's chat shape).
  const bool logprobs = fields.boolean("logprobs").value_or(false);
  const auto top_logprobs = fields.integer("top_logprobs", 0, core::kMaxLogprobs);
  if (top_logprobs && *top_logprobs > 0 && !logprobs) {
    throw invalid_field("top_logprobs", "top_logprobs needs \"logprobs\": true");
  }
  if (logprobs) out.input.sampling.logprobs = static_cast<int32_t>(top_logprobs.value_or(0));
  // As vLLM: only a final message in the answer's role is echoed. vLLM answers in the final
  // message's role when add_generation_prompt is false (and echoes that message); Headway always
  // answers as the assistant, the one role OpenAI's response schema has.
  if (fields.boolean("echo").value_or(false)) {
    const ChatMessage& last = out.input.messages.back();
    out.chat_echo = last.role == "assistant" ? last.content : std::string();
  }
  return out;
}

void OpenAiRequest::name_answer(std::string id, std::string field) {
  input.request_id = service_request_id(id);
  answer_id = std::move(id);
  answer_id_field = std::move(field);
}

}  // namespace headway::serving::http
