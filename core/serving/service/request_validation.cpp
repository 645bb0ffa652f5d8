#include "request_validation.h"

#include <fmt/format.h>
#include <headway/serving/echoed_input.h>

#include <algorithm>
#include <cmath>

#include "kv_stage_file.h"

namespace headway::serving {
namespace {

[[noreturn]] void invalid(const std::string& message, std::string param) {
  throw ServiceError(ErrorCode::kInvalidArgument, message, std::move(param));
}

}  // namespace

void validate_prompt_form(const GenerateInput& input) {
  using Kind = GenerateInput::PromptKind;
  const bool text = !input.prompt_text.empty();
  const bool ids = !input.prompt_ids.empty();
  const bool chat = !input.messages.empty();
  if (static_cast<int>(text) + static_cast<int>(ids) + static_cast<int>(chat) > 1) {
    invalid("give exactly one of a text prompt, prompt token ids or chat messages", "prompt");
  }
  if (!input.tools_json.empty() && input.prompt_kind != Kind::kChat) {
    invalid("tools are rendered by the chat template: they need chat messages", "tools");
  }
  if (!input.template_kwargs_json.empty() && input.prompt_kind != Kind::kChat) {
    invalid("chat_template_kwargs are for the chat template: they need chat messages",
            "chat_template_kwargs");
  }
  if (input.prompt_kind != Kind::kChat &&
      (!input.add_generation_prompt || input.continue_final_message)) {
    invalid(
        "add_generation_prompt and continue_final_message are for the chat template: they "
        "need chat messages",
        input.continue_final_message ? "continue_final_message" : "add_generation_prompt");
  }
  if (input.add_generation_prompt && input.continue_final_message) {
    invalid(
        "continue_final_message needs add_generation_prompt false: the prompt either ends "
        "with a new assistant turn or inside the final message, not both",
        "continue_final_message");
  }
  switch (input.prompt_kind) {
    case Kind::kText:
      if (ids || chat) invalid("prompt_kind is text but another prompt form is set", "prompt");
      if (!text) invalid("the prompt is empty", "prompt");
      break;
    case Kind::kTokenIds:
      if (text || chat)
        invalid("prompt_kind is token ids but another prompt form is set", "prompt");
      if (!ids) invalid("the prompt token id list is empty", "prompt");
      break;
    case Kind::kChat:
      if (text || ids) invalid("prompt_kind is chat but another prompt form is set", "messages");
      if (!chat) invalid("messages is empty: a chat request needs at least one", "messages");
      for (size_t i = 0; i < input.messages.size(); ++i) {
        const std::string& role = input.messages[i].role;
        if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
          invalid(fmt::format("messages[{}].role: {} is not system, user, assistant or tool", i,
                              quote_input(role)),
                  fmt::format("messages[{}].role", i));
        }
      }
      break;
  }
}

void validate_sampling(const GenerateInput& input, uint32_t vocab) {
  const core::SamplingParams& s = input.sampling;
  if (input.max_tokens < 1) invalid("max_tokens must be at least 1", "max_tokens");
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f) {
    invalid(fmt::format("temperature must be a finite number >= 0, got {}", s.temperature),
            "temperature");
  }
  if (!std::isfinite(s.top_p) || s.top_p <= 0.0f || s.top_p > 1.0f) {
    invalid(fmt::format("top_p must be in (0, 1], got {}", s.top_p), "top_p");
  }
  if (!std::isfinite(s.min_p) || s.min_p < 0.0f || s.min_p > 1.0f) {
    invalid(fmt::format("min_p must be in [0, 1], got {}", s.min_p), "min_p");
  }
  if (input.stop.size() > kMaxStopStrings) {
    invalid(fmt::format("at most {} stop strings are allowed, got {}", kMaxStopStrings,
                        input.stop.size()),
            "stop");
  }
  for (size_t i = 0; i < input.stop.size(); ++i) {
    if (input.stop[i].empty()) {
      invalid(fmt::format("stop[{}] is an empty string", i), fmt::format("stop[{}]", i));
    }
  }
  validate_token_ids(s.stop_token_ids, vocab, "stop_token_ids");
}

namespace {

// Each step matches every sequence against the outputs, so their number and length are bounded,
// as stop_token_ids are: one request must not slow the steps of those batched with it. The names
// are gRPC's (bad_words_ids); HTTP's words are encoded into them and cannot fail these checks.
void validate_bad_words(const core::SamplingParams& s, uint32_t vocab) {
  size_t total = 0;
  for (const auto& word : s.bad_words_ids) total += word.size();
  if (s.bad_words_ids.size() > kMaxBadWordSequences || total > kMaxBadWordTokens) {
    invalid(fmt::format("bad_words give {} token sequences of {} tokens in all; at most {} "
                        "sequences of {} tokens in all are taken",
                        s.bad_words_ids.size(), total, kMaxBadWordSequences, kMaxBadWordTokens),
            "bad_words");
  }
  for (size_t i = 0; i < s.bad_words_ids.size(); ++i) {
    const std::string field = fmt::format("bad_words_ids[{}]", i);
    if (s.bad_words_ids[i].empty()) invalid(field + " has no token", field);
    validate_token_ids(s.bad_words_ids[i], vocab, field.c_str());
  }
  // Every allowed token banned outright would leave nothing to choose.
  if (!s.allowed_token_ids.empty() &&
      std::all_of(s.allowed_token_ids.begin(), s.allowed_token_ids.end(), [&](int32_t id) {
        return std::any_of(s.bad_words_ids.begin(), s.bad_words_ids.end(),
                           [&](const auto& word) { return word.size() == 1 && word[0] == id; });
      })) {
    invalid("bad_words ban every token of allowed_token_ids: nothing would be left to choose",
            "bad_words");
  }
}

}  // namespace

void validate_logits_processing(core::SamplingParams& s, const ModelSummary& model) {
  const uint32_t vocab = model.vocab;
  for (const auto& [name, value] : {std::pair{"presence_penalty", s.presence_penalty},
                                    std::pair{"frequency_penalty", s.frequency_penalty}}) {
    if (!(value >= -2.0f && value <= 2.0f)) {
      invalid(fmt::format("{} must be in [-2, 2], got {}", name, value), name);
    }
  }
  if (!std::isfinite(s.repetition_penalty) || s.repetition_penalty <= 0.0f) {
    invalid(
        fmt::format("repetition_penalty must be a finite number > 0, got {}", s.repetition_penalty),
        "repetition_penalty");
  }
  std::sort(s.logit_bias.begin(), s.logit_bias.end());
  for (size_t i = 0; i < s.logit_bias.size(); ++i) {
    const auto [id, bias] = s.logit_bias[i];
    const std::string param = fmt::format("logit_bias.{}", id);
    if (id < 0 || static_cast<uint32_t>(id) >= vocab) {
      invalid(fmt::format("logit_bias: token id {} is outside the vocabulary [0, {})", id, vocab),
              param);
    }
    if (i > 0 && s.logit_bias[i - 1].first == id) {
      invalid(fmt::format("logit_bias names token id {} more than once", id), param);
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      invalid(fmt::format("logit_bias for token id {} must be in [-100, 100], got {}", id, bias),
              param);
    }
  }
  validate_token_ids(s.allowed_token_ids, vocab, "allowed_token_ids");
  validate_bad_words(s, vocab);
  std::sort(s.allowed_token_ids.begin(), s.allowed_token_ids.end());
  s.allowed_token_ids.erase(std::unique(s.allowed_token_ids.begin(), s.allowed_token_ids.end()),
                            s.allowed_token_ids.end());
  if (s.logprobs < -1 || s.logprobs > core::kMaxLogprobs) {
    invalid(fmt::format("logprobs must be from 0 to {} (the most likely tokens reported beside "
                        "each generated one), got {}",
                        core::kMaxLogprobs, s.logprobs),
            "logprobs");
  }
  if (s.prompt_logprobs < -1 || s.prompt_logprobs > core::kMaxLogprobs) {
    invalid(fmt::format("prompt_logprobs must be from 0 to {} (the most likely tokens reported "
                        "beside each prompt token), got {}",
                        core::kMaxLogprobs, s.prompt_logprobs),
            "prompt_logprobs");
  }
  if (s.prompt_logprobs >= 0 && (!model.reports_prompt_logprobs || !model.samples_on_host)) {
    invalid(model.samples_on_host
                ? "prompt_logprobs is not supported by this deployment: its model does not return "
                  "a logits row for every prompt position (hw_model_info.returns_prompt_logits) "
                  "or reads no token ids"
                : "prompt_logprobs is not supported by this deployment: its model samples on its "
                  "device",
            "prompt_logprobs");
  }
  const char* penalty = s.presence_penalty != 0.0f     ? "presence_penalty"
                        : s.frequency_penalty != 0.0f  ? "frequency_penalty"
                        : s.repetition_penalty != 1.0f ? "repetition_penalty"
                                                       : nullptr;
  if (model.samples_on_host) {
    if ((penalty == nullptr && s.bad_words_ids.empty()) || model.reads_token_ids) return;
    const char* field = penalty != nullptr ? penalty : "bad_words";
    invalid(fmt::format("{} is not supported by this deployment: {} the tokens the request "
                        "generated, and its model reads only their number, not their ids",
                        field,
                        penalty != nullptr ? "penalties count"
                                           : "bad words are matched "
                                             "against"),
            field);
  }
  if (!s.uses_host_processing()) return;
  const char* field = penalty != nullptr             ? penalty
                      : s.min_tokens > 0             ? "min_tokens"
                      : !s.logit_bias.empty()        ? "logit_bias"
                      : !s.allowed_token_ids.empty() ? "allowed_token_ids"
                      : !s.bad_words_ids.empty()     ? "bad_words"
                                                     : "logprobs";
  invalid(fmt::format("{} is not supported by this deployment: its model samples on its device, "
                      "and only models that return logits to the host apply penalties, "
                      "min_tokens, logit_bias, allowed_token_ids and bad_words, or report "
                      "logprobs",
                      field),
          field);
}

void validate_min_tokens(uint32_t min_tokens, uint32_t max_tokens,
                         std::string_view max_tokens_field) {
  if (min_tokens > max_tokens) {
    invalid(fmt::format("min_tokens ({}) must not exceed {} ({})", min_tokens, max_tokens_field,
                        max_tokens),
            "min_tokens");
  }
}

void validate_token_ids(std::span<const int32_t> ids, uint32_t vocab, const char* field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<uint32_t>(ids[i]) >= vocab) {
      invalid(fmt::format("{}[{}]: token id {} is outside the vocabulary [0, {})", field, i, ids[i],
                          vocab),
              fmt::format("{}[{}]", field, i));
    }
  }
}

void validate_length(uint32_t prompt_tokens, uint32_t max_tokens, uint32_t max_model_len,
                     const char* prompt_field, std::string_view max_tokens_field) {
  // A prompt that fills the context alone is the prompt's fault, whatever max_tokens says (and a
  // chat request without max_tokens never chose one).
  // OpenAI's code for both, which clients (and agent frameworks trimming a conversation) test.
  const char* kTooLong = "context_length_exceeded";
  if (prompt_tokens >= max_model_len) {
    throw ServiceError(
        ErrorCode::kInvalidArgument,
        fmt::format("the prompt is {} tokens and this model's maximum context length is {} "
                    "tokens, which leaves no room for a completion; shorten the prompt",
                    prompt_tokens, max_model_len),
        prompt_field)
        .with_openai_code(kTooLong);
  }
  if (static_cast<uint64_t>(prompt_tokens) + max_tokens > max_model_len) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("this model's maximum context length is {} tokens, but {} were "
                                   "requested ({} in the prompt, {} for the completion); reduce "
                                   "the prompt or {}",
                                   max_model_len, static_cast<uint64_t>(prompt_tokens) + max_tokens,
                                   prompt_tokens, max_tokens, max_tokens_field),
                       std::string(max_tokens_field))
        .with_openai_code(kTooLong);
  }
}

void dedupe_stop_token_ids(std::vector<int32_t>& ids, std::span<const int32_t> not_counted) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  size_t counted = ids.size();
  for (const int32_t id : not_counted) {
    if (std::binary_search(ids.begin(), ids.end(), id)) --counted;
  }
  if (counted > kMaxStopTokenIds) {
    invalid(fmt::format("at most {} distinct stop token ids are allowed, got {}", kMaxStopTokenIds,
                        counted),
            "stop_token_ids");
  }
}

uint32_t truncation_length(int32_t requested, uint32_t max_model_len) {
  if (requested == -1) return max_model_len;
  if (requested < 1 || static_cast<uint32_t>(requested) > max_model_len) {
    invalid(fmt::format("truncate_prompt_tokens is {}; it must be -1 (the model's maximum context "
                        "length) or from 1 to this model's maximum context length, {}",
                        requested, max_model_len),
            "truncate_prompt_tokens");
  }
  return static_cast<uint32_t>(requested);
}

void validate_request_class(const std::string& request_class) {
  bool ok = !request_class.empty() && request_class.size() <= kMaxRequestClassLength;
  for (char c : request_class) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-');
  }
  if (!ok) {
    invalid(fmt::format("request_class {} must be 1 to {} characters of A-Z a-z 0-9 _ . -",
                        quote_input(request_class), kMaxRequestClassLength),
            "request_class");
  }
}

void validate_request_id(const std::string& request_id) {
  bool printable = true;
  for (char c : request_id) printable = printable && c >= 0x20 && c <= 0x7E;
  if (!printable || request_id.size() > kMaxRequestIdLength) {
    invalid(fmt::format("request_id {} must be at most {} characters of printable ASCII",
                        quote_input(request_id), kMaxRequestIdLength),
            "request_id");
  }
}

void refuse_handoff_fields(const GenerateInput& input) {
  const char* field = input.prefill_only             ? "prefill_only"
                      : input.kv_source              ? "kv_source"
                      : !input.generated_ids.empty() ? "generated_ids"
                                                     : nullptr;
  if (field == nullptr) return;
  throw ServiceError(ErrorCode::kInvalidArgument,
                     "prefill_only, kv_source and generated_ids are for engine processes behind a "
                     "router ([server] role = \"engine\"), which only a router sends them to",
                     field);
}

void validate_handoff(const GenerateInput& input, size_t prompt_tokens, uint32_t vocab) {
  if (!input.kv_source) {
    // Tokens already generated only mean something beside the KV they continue from.
    if (!input.generated_ids.empty()) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         "generated_ids: only for a request continued from kv_source, and this "
                         "one has none",
                         "generated_ids");
    }
    return;
  }
  if (!is_kv_stage_name(input.kv_source->shm_name)) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("kv_source.shm_name: {} is not a staged KV's name (they "
                                   "start with {})",
                                   quote_input(input.kv_source->shm_name), kKvStagePrefix),
                       "kv_source");
  }
  if (input.prefill_only) {
    throw ServiceError(ErrorCode::kInvalidArgument, "prefill_only and kv_source exclude each other",
                       "kv_source");
  }
  if (input.truncate_prompt_tokens) {
    // The staged KV is that of the prompt the prefill process kept: a router sends the kept ids.
    throw ServiceError(ErrorCode::kInvalidArgument,
                       "truncate_prompt_tokens and kv_source exclude each other", "kv_source");
  }
  if (input.generated_ids.empty() || input.generated_ids.size() >= input.max_tokens) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("generated_ids: {} tokens with max_tokens {}; a continued "
                                   "request has generated at least one and fewer than max_tokens",
                                   input.generated_ids.size(), input.max_tokens),
                       "generated_ids");
  }
  validate_token_ids(input.generated_ids, vocab, "generated_ids");
  // Fewer than all: the last token's position is computed here, for the logits of the next. With
  // all of them there would be nothing to compute, which no scheduler can plan (a step of zero
  // tokens is refused, and the engine would fail with every request on it).
  if (input.kv_source->computed_tokens >= prompt_tokens + input.generated_ids.size()) {
    throw ServiceError(
        ErrorCode::kInvalidArgument,
        fmt::format("kv_source.computed_tokens: {} for {} prompt and generated tokens; the KV of a "
                    "continued request covers fewer positions than its tokens (the last one is "
                    "computed where it continues)",
                    input.kv_source->computed_tokens, prompt_tokens + input.generated_ids.size()),
        "kv_source");
  }
}

}  // namespace headway::serving
