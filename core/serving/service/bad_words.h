// vLLM's bad_words: the words a request must not generate, as the token sequences the sampler bans
// (core::SamplingParams::bad_words_ids). Threading: a pure function of its arguments.
#pragma once

#include <headway/core/tokenizer.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace headway::serving {

// Each word's leading whitespace is dropped and the rest encoded twice, as vLLM does: as written
// (a word at the start of the text) and after one space (in the middle of text). The second is
// kept only when it is as many tokens as the first and starts with another token, so a tokenizer
// that spells the space as a token of its own bans nothing twice. Throws ServiceError
// (kInvalidArgument, param "bad_words") naming a word that encodes to no token.
std::vector<std::vector<int32_t>> bad_words_token_ids(const core::Tokenizer& tokenizer,
                                                      std::span<const std::string> words);

}  // namespace headway::serving
