// The checks submit() runs on a request before any engine sees it, following vLLM's
// SamplingParams rules (and OpenAI's limit of 4 stop strings). Each failure is a ServiceError with
// code kInvalidArgument whose message says what is wrong and whose param names the field.
//
// Threading: pure functions.
#pragma once

#include <headway/serving/generation_service.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving {

inline constexpr size_t kMaxStopStrings = 4;
// The engine compares every generated token with each stop token id: a bound keeps one request
// from slowing the steps of every request batched with it.
inline constexpr size_t kMaxStopTokenIds = 1024;
// bad_words after encoding (each word gives one or two sequences): at most this many sequences,
// of at most this many tokens in all.
inline constexpr size_t kMaxBadWordSequences = 256;
inline constexpr size_t kMaxBadWordTokens = 4096;
inline constexpr size_t kMaxRequestClassLength = 32;
// kMaxRequestIdLength: generation_service.h, beside GenerateInput::request_id.

// Exactly one prompt form is filled (the one prompt_kind names) and it is not empty.
void validate_prompt_form(const GenerateInput& input);

// max_tokens >= 1; temperature finite and >= 0; top_p in (0, 1]; min_p in [0, 1]; top_k any (0 is
// off); stop strings non-empty, at most kMaxStopStrings; stop_token_ids inside the vocabulary.
void validate_sampling(const GenerateInput& input, uint32_t vocab);

// The logits processing only the core sampler does (vLLM's ranges): presence_penalty and
// frequency_penalty in [-2, 2], repetition_penalty finite and > 0, logit_bias ids inside the
// vocabulary and named once, biases in [-100, 100] (OpenAI's range); logprobs -1 (off) or 0 to
// kMaxLogprobs; sorts logit_bias by id. When the model samples on its device
// (`model.samples_on_host` false) any of them, min_tokens, bad_words or logprobs is refused naming
// the field; when it does not read token ids (`model.reads_token_ids` false), the three penalties
// and bad_words are. bad_words_ids: bounded (kMaxBadWordSequences, kMaxBadWordTokens), each
// sequence non-empty and in the vocabulary, not banning every allowed token.
// min_tokens against max_tokens: validate_min_tokens.
void validate_logits_processing(core::SamplingParams& sampling, const ModelSummary& model);

// min_tokens <= max_tokens (once max_tokens is known).
void validate_min_tokens(uint32_t min_tokens, uint32_t max_tokens,
                         std::string_view max_tokens_field = "max_tokens");

// Every id inside [0, vocab): `field` names the list in messages ("prompt_ids").
void validate_token_ids(std::span<const int32_t> ids, uint32_t vocab, const char* field);

// vLLM's context-length rule: prompt + max_tokens must fit in max_model_len. A prompt of
// max_model_len tokens or more is blamed on `prompt_field` ("prompt" or "messages"), anything
// else on `max_tokens_field` (the client's name for it).
void validate_length(uint32_t prompt_tokens, uint32_t max_tokens, uint32_t max_model_len,
                     const char* prompt_field, std::string_view max_tokens_field = "max_tokens");

// A process that takes requests from clients (not an engine process behind a router) refuses the
// disaggregation fields only a router sets: prefill_only, kv_source, generated_ids.
void refuse_handoff_fields(const GenerateInput& input);

// The disaggregation fields a router process sets: prefill_only and kv_source exclude each other;
// kv_source needs a shared-memory name and at least one generated id (inside the vocabulary), and
// leaves tokens to generate (generated ids < max_tokens); generated ids need a kv_source; a
// continued request is not truncated again (truncate_prompt_tokens).
void validate_handoff(const GenerateInput& input, size_t prompt_tokens, uint32_t vocab);

// Sorts stop_token_ids and drops repeats (they mean nothing, and each cost a comparison per
// generated token); more than kMaxStopTokenIds distinct ids is kInvalidArgument, not counting
// `not_counted` (distinct ids: the checkpoint's end tokens, which the admission adds).
void dedupe_stop_token_ids(std::vector<int32_t>& ids, std::span<const int32_t> not_counted = {});

// The number of prompt tokens truncate_prompt_tokens keeps: `requested` itself, or max_model_len
// for -1. 0, below -1 or above max_model_len is kInvalidArgument naming the field.
uint32_t truncation_length(int32_t requested, uint32_t max_model_len);

// A metrics label: 1..kMaxRequestClassLength characters of [A-Za-z0-9_.-].
void validate_request_class(const std::string& request_class);

// A request id the client chose (empty: the service assigns one): at most kMaxRequestIdLength
// bytes of printable ASCII, space included.
void validate_request_id(const std::string& request_id);

}  // namespace headway::serving
