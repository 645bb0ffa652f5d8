// The /v1/completions request `headway bench` sends for one workload request: a prompt of exactly
// the request's prompt length as token ids (so no tokenizer decides the length), max_tokens = its
// output length with ignore_eos so that the server produces all of them (vLLM's extension, which
// Headway's server follows), streaming with the final usage chunk, and the Headway extension field
// "request_class" naming the workload class.
//
// Pure functions; thread-safe.
#pragma once

#include <headway/core/synthetic_prompt.h>
#include <headway/core/workload.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving::bench {

using core::TokenIdRange;

// For a vocabulary of `vocab` ids: [32, vocab) when vocab > 64 (low ids are special tokens in
// many tokenizers: <unk>, <s>, </s>, padding, byte fallbacks), [0, vocab) for a smaller one; an
// unknown vocabulary gives [32, 128), ids every tokenizer of a real model has. Throws core::Error
// for a vocab of 0 or above INT32_MAX.
TokenIdRange token_id_range(std::optional<uint32_t> vocab);

// The JSON body. `model` may be empty (then no "model" field is sent).
std::string completion_body(const core::WorkloadRequest& request, std::string_view class_name,
                            std::string_view model, const std::vector<int32_t>& prompt);

}  // namespace headway::serving::bench
