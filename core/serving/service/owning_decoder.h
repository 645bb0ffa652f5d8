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

// `keep_stop_string`, `min_tokens`: as make_incremental_decoder's.
std::unique_ptr<IncrementalDecoder> make_decoder(std::shared_ptr<const core::Tokenizer> tokenizer,
                                                 std::vector<std::string> stop_strings,
                                                 std::vector<int32_t> stop_token_ids,
                                                 bool keep_stop_string, uint32_t min_tokens);

// For a model without a tokenizer (token ids in, token ids out): no text, but the stop token id
// that ended a request is still reported (stop_reason); none counts among the first `min_tokens`.
std::unique_ptr<IncrementalDecoder> make_token_id_decoder(std::vector<int32_t> stop_token_ids,
                                                          uint32_t min_tokens);

}  // namespace headway::serving
