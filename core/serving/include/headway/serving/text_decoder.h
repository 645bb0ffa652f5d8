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

// A decoder of `tokenizer`'s ids with these options.
std::unique_ptr<IncrementalDecoder> make_incremental_decoder(const core::Tokenizer& tokenizer,
                                                             DecodeOptions options = {});

}  // namespace headway::serving
