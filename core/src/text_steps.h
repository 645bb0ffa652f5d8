// The steps of a tokenizer.json around its model, for SentencePiece-style BPE (Llama 2, Mistral,
// Mixtral: the vocabulary is characters, a space is written '▁', and bytes outside the vocabulary
// fall back to <0xXX> tokens): the normalizer (NFC, Prepend, Replace, in sequence), the Metaspace
// pre-tokenizer, and the decoder (Replace, ByteFallback, Fuse, Strip, or Metaspace), each as
// Hugging Face's tokenizers applies it (checked against tokenizers 0.23.3).
//
// Ownership: plain values. Threading: immutable after loading; the functions are reentrant.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace headway::core {

class JsonFields;

struct NormalizerStep {
  enum class Kind { kNfc, kPrepend, kReplace };
  Kind kind = Kind::kNfc;
  std::string text;         // Prepend's, or what Replace replaces
  std::string replacement;  // what Replace writes
};

// The normalizer of tokenizer.json `root` (none, NFC, Prepend, Replace with a String pattern, or a
// Sequence of them); refuses any other naming the field.
std::vector<NormalizerStep> read_normalizer(const JsonFields& f, const nlohmann::json& root);
// `text` through the steps (Prepend leaves empty text empty, as Hugging Face's does).
std::string normalize(const std::vector<NormalizerStep>& steps, std::string_view text);

// The Metaspace pre-tokenizer: spaces become `replacement`, which is prepended where the scheme
// says (always; first: only to the text's first stretch; never), and with `split` every
// replacement begins a new word.
struct Metaspace {
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement = "\xE2\x96\x81";  // '▁' U+2581
  Prepend prepend = Prepend::kAlways;
  bool split = true;
};
// Reads a Metaspace step (prepend_scheme, or the older add_prefix_space); `field` is its path.
Metaspace read_metaspace(const JsonFields& f, const nlohmann::json& step, const std::string& field);
// Appends the words of `stretch` to `words` (a buffer of `storage`, which must outlive them:
// `storage` is overwritten). `at_start`: the stretch begins the whole text.
void metaspace_words(const Metaspace& m, std::string_view stretch, bool at_start,
                     std::string& storage, std::vector<std::string_view>& words);

struct DecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  Kind kind = Kind::kFuse;
  std::string text;         // Replace's pattern, Strip's content, Metaspace's replacement
  std::string replacement;  // Replace's content
  uint32_t start = 0;       // Strip: characters taken off the front of each token
  uint32_t stop = 0;        // Strip: off the back
  bool prepended = true;    // Metaspace: its prepend_scheme is not "never"
};
// The decoder of tokenizer.json `root` for SentencePiece-style BPE: Metaspace, or a Sequence of
// Replace (String pattern), ByteFallback, Fuse and Strip; refuses any other naming the field.
std::vector<DecoderStep> read_sentencepiece_decoder(const JsonFields& f,
                                                    const nlohmann::json& root);
// The text of `tokens` (their vocabulary strings) through the steps. Byte tokens (<0xXX>) become
// their bytes, valid UTF-8 or not (Hugging Face writes an invalid run as one U+FFFD per token).
std::string decode_tokens(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens);

}  // namespace headway::core
