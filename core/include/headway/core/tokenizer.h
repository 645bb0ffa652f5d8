// Text <-> token ids for real models, in the core and shared by every frontend and model.
//
// Tokenizer::load picks the implementation from what a checkpoint directory ships:
// - tokenizer.model: SentencePiece (Debian's libsentencepiece), as Llama 1/2 and Mistral ship;
// - tokenizer.json of type "HeadwayByte": the byte-level tokenizer of the built-in model
//   (byte_tokenizer.h), written by `headway model make-tiny`.
// Anything else (e.g. a Hugging Face BPE tokenizer.json) is refused with a message naming the file.
//
// Ownership: load returns an owning pointer; the tokenizer holds no reference to the directory.
// Threading: every const method is safe to call concurrently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headway::core {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, without BOS (prepend bos() where the model expects it).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Text of `ids`; special tokens (BOS, EOS, padding) and ids outside the vocabulary decode to
  // nothing.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int32_t bos() const = 0;  // -1 when there is none
  virtual int32_t eos() const = 0;  // -1 when there is none
  virtual uint32_t vocab_size() const = 0;
  virtual std::string_view kind() const = 0;  // "sentencepiece", "byte"

  // Throws Error(HW_INVALID_ARGUMENT) naming the file when nothing usable is there or it is
  // malformed.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& checkpoint_dir);
};

}  // namespace headway::core
