// The IncrementalDecoder that RequestStream runs for a request: token ids in, final UTF-8 text out.
//
// - Multi-byte characters split across tokens are held until complete; what is returned is always
//   valid UTF-8 (bytes that can never complete a character become U+FFFD).
// - Stop strings may span tokens: the longest tail that could still begin a stop string is held
//   back; once one matches, the text before it is returned and nothing after.
// - A stop token id (the request's stop_token_ids, which end it) gives no text.
// - Cost per token is bounded: only a short window of recent ids (the ones not yet turned into text
//   plus a few before them, for tokenizers such as SentencePiece whose decoding of a token depends
//   on its neighbour) is decoded on each call, as vLLM's prefix/read offsets do.
//
// Ownership: the decoder keeps a reference to `tokenizer`, which must outlive it (the service owns
// the tokenizer for the life of the process). Threading: one decoder per request, used by one
// thread at a time.
#pragma once

#include <headway/core/tokenizer.h>
#include <headway/serving/incremental_decoder.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace headway::serving {

// Empty stop strings are ignored. A matched stop string's text is left out of the output unless
// `keep_stop_string` (vLLM's include_stop_str_in_output). Neither stop strings nor stop token ids
// count in the text of the first `min_tokens` ids (vLLM's min_tokens): a stop string must lie
// wholly in the text of later ids.
std::unique_ptr<IncrementalDecoder> make_incremental_decoder(
    const core::Tokenizer& tokenizer, std::vector<std::string> stop_strings,
    std::vector<int32_t> stop_token_ids = {}, bool keep_stop_string = false,
    uint32_t min_tokens = 0);

}  // namespace headway::serving
