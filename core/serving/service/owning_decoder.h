// The IncrementalDecoder a request's stream runs, holding a reference to the tokenizer it decodes
// with: a frontend may still read a stream's last chunk after the service (which owns the
// tokenizer) is gone.
//
// Ownership: shares the tokenizer. Threading: as IncrementalDecoder (one consumer thread).
#pragma once

#include <headway/core/tokenizer.h>
#include <headway/serving/incremental_decoder.h>

#include <memory>
#include <string>
#include <vector>

namespace headway::serving {

// A decoder of `tokenizer`'s ids with these options, sharing the tokenizer.
std::unique_ptr<IncrementalDecoder> make_decoder(std::shared_ptr<const core::Tokenizer> tokenizer,
                                                 DecodeOptions options);

// For a model without a tokenizer (token ids in, token ids out): no text, but the stop token id
// that ended a request is still reported (stop_reason), as `options` say.
std::unique_ptr<IncrementalDecoder> make_token_id_decoder(DecodeOptions options);

}  // namespace headway::serving
