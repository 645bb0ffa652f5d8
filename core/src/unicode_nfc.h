// Unicode Normalization Form C, the normalizer Hugging Face tokenizer.json files of the Qwen 2
// family and others name ("normalizer": {"type": "NFC"}): a prompt is composed before it is
// pre-tokenized, so "é" written as "e" + U+0301 encodes as the model saw "é" in training. The
// Unicode tables are utf8proc's (Debian's libutf8proc), not hand-written.
//
// Threading: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace headway::core {

// `text` in NFC. Bytes that are not valid UTF-8 are kept as they are, and the valid text between
// them is normalized piece by piece. ASCII text comes back unchanged without a table lookup.
std::string to_nfc(std::string_view text);

}  // namespace headway::core
