// Text <-> token ids for real models, in the core and shared by every frontend and model.
//
// Tokenizer::load picks the implementation from what a checkpoint directory ships:
// - tokenizer.json of model type "BPE": Hugging Face byte-level BPE (Llama 3, GPT-2 style), see
//   bpe_tokenizer.h;
// - tokenizer.json of type "HeadwayByte": the byte-level tokenizer of the built-in model
//   (byte_tokenizer.h), written by `headway model make-tiny`;
// - tokenizer.model: SentencePiece (Llama 1/2, Mistral), only in a process that links the
//   `headway_tokenizers` library. libsentencepiece carries its own protobuf and crashes a process
//   that also links gRPC, so the factory itself (library `headway_text`) does not link it; the
//   SentencePiece library registers a loader hook (set_sentencepiece_loader) at start-up instead.
// When SentencePiece is available tokenizer.model is preferred over tokenizer.json (as before).
// Anything else is refused with a message naming the file and the field.
//
// Ownership: load returns an owning pointer; the tokenizer holds no reference to the directory.
// Threading: every const method is safe to call concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headway::core {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, without BOS (prepend bos() where the model expects it). Tokenizers that
  // know their special tokens' text (BPE) turn that text into the special ids, so a rendered chat
  // template that starts with the BOS text already starts with bos().
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Text of `ids`; special tokens (BOS, EOS, padding) and ids outside the vocabulary decode to
  // nothing. The bytes are returned as they are: a multi-byte UTF-8 character split across calls
  // comes back in pieces (IncrementalDecoder reassembles them).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // As decode(), but each special token gives its text ("<|eot_id|>", "[TOOL_CALLS]"), as Hugging
  // Face's fast tokenizers' decode(skip_special_tokens=False) does (vLLM's skip_special_tokens:
  // false). Ids outside the vocabulary still decode to nothing.
  virtual std::string decode_with_special_tokens(std::span<const int32_t> ids) const = 0;
  virtual int32_t bos() const = 0;  // -1 when there is none
  // Whether a text prompt starts with bos() (Hugging Face's encode with its special tokens):
  // false without a BOS, and where tokenizer_config.json says "add_bos_token": false.
  virtual bool adds_bos() const { return bos() >= 0; }
  virtual int32_t eos() const = 0;  // -1 when there is none
  virtual uint32_t vocab_size() const = 0;
  virtual std::string_view kind() const = 0;  // "sentencepiece", "byte", "bpe"
  // True when decoding drops the space that begins the first piece, so that a token's text depends
  // on the tokens before it (SentencePiece, and SentencePiece-style BPE from tokenizer.json): a
  // token's own text is read after a neighbour, a stream's first output after the prompt.
  virtual bool drops_first_space() const { return false; }
  // True when the bytes of a character not yet complete decode as U+FFFD rather than as themselves
  // (SentencePiece's decoder), so that a trailing U+FFFD may mean "more ids to come".
  virtual bool decodes_incomplete_characters_as_replacement() const { return false; }

  // The text a special token is written as in prompts and chat templates ("<|begin_of_text|>"),
  // empty when the tokenizer does not map that text back to the id (then templates render
  // bos_token/eos_token as empty and the caller prepends bos() itself).
  virtual std::string special_token_text(int32_t /*id*/) const { return {}; }

  // Throws Error(HW_INVALID_ARGUMENT) naming the file when nothing usable is there or it is
  // malformed or unsupported.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& checkpoint_dir);

  // The SentencePiece loader the factory calls for tokenizer.model; installed by the
  // headway_tokenizers library at static initialisation. Passing an empty function removes it.
  // Threading: call before any load() (start-up), not concurrently with it.
  using FileLoader = std::function<std::unique_ptr<Tokenizer>(const std::filesystem::path& file)>;
  static void set_sentencepiece_loader(FileLoader loader);
};

// A token to decode others after, for a tokenizer that drops the space that begins the text it
// decodes (drops_first_space()): the last token of "a", and its text. nullopt for the other
// tokenizers, or where that token has no text.
struct DecodeAnchor {
  int32_t id = -1;
  std::string text;
};
// (Inline: the guided library uses them through the interface alone, without the tokenizers.)
inline std::optional<DecodeAnchor> decode_anchor(const Tokenizer& tokenizer) {
  if (!tokenizer.drops_first_space()) return std::nullopt;
  // The last token of "a": "▁a" in a real vocabulary, the byte token of "a" in one without it.
  const std::vector<int32_t> ids = tokenizer.encode("a");
  if (ids.empty()) return std::nullopt;
  DecodeAnchor anchor{ids.back(), tokenizer.decode(std::span(&ids.back(), 1))};
  if (anchor.text.empty()) return std::nullopt;
  return anchor;
}

// The bytes token `id` adds after any other token (logprobs' token text, guided decoding's
// vocabulary): decode([id]), or, with an anchor, decode([anchor, id]) less the anchor's text, so
// that "▁with" is " with" and not "with".
inline std::string token_bytes(const Tokenizer& tokenizer,
                               const std::optional<DecodeAnchor>& anchor, int32_t id) {
  if (anchor) {
    const std::array<int32_t, 2> pair = {anchor->id, id};
    std::string text = tokenizer.decode(pair);
    if (text.compare(0, anchor->text.size(), anchor->text) == 0) {
      return text.erase(0, anchor->text.size());
    }
  }
  return tokenizer.decode(std::span(&id, 1));
}

}  // namespace headway::core
