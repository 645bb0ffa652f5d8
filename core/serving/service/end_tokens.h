// The tokens a checkpoint's model ends an answer with. A model plugin declares one end-of-sequence
// token (hw_model_info.eos_token: the first of config.json's eos_token_id), but an instruct model
// often ends its turn with another: Llama 3.1 Instruct lists [128001, 128008, 128009] and ends a
// turn with 128009 (<|eot_id|>), which is also its tokenizer's eos_token. vLLM stops on the
// tokenizer's EOS and on every id of generation_config.json's eos_token_id; the service stops on
// the same ids by adding them to each request's stop_token_ids (unless ignore_eos).
//
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace headway::serving {

// The ids of eos_token_id (an id, a list of ids, or null) in `dir`'s generation_config.json and
// config.json (files that are missing give none), and `tokenizer_eos` (-1: none); sorted, each
// once. Throws core::Error naming the file and the field when a file is not JSON, the field is not
// of that form, or an id lies outside [0, vocab).
std::vector<int32_t> checkpoint_end_tokens(const std::filesystem::path& dir, int32_t tokenizer_eos,
                                           uint32_t vocab);

}  // namespace headway::serving
