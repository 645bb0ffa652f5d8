// The byte-level tokenizer of the built-in model: every UTF-8 byte b is token byte_offset + b, and
// a few special tokens (BOS, EOS, padding) follow. Lossless for any text, no vocabulary file to
// download. Described by a tokenizer.json:
//   {"model": {"type": "HeadwayByte", "byte_offset": 0},
//    "added_tokens": [{"id": 256, "content": "<s>", "special": true}, ...],
//    "bos_token": "<s>", "eos_token": "</s>", "vocab_size": 320}
//
// Ownership: plain value. Threading: immutable after construction; const methods are reentrant.
#pragma once

#include <headway/core/tokenizer.h>

#include <map>
#include <string>

namespace headway::core {

class ByteTokenizer final : public Tokenizer {
 public:
  // bos/eos may be -1 (none). vocab_size covers the bytes and the special tokens.
  // `special_text`: each added token's content, which decode_with_special_tokens writes.
  ByteTokenizer(int32_t byte_offset, int32_t bos, int32_t eos, uint32_t vocab_size,
                std::map<int32_t, std::string> special_text = {});

  // Reads a tokenizer.json as above. Throws Error naming the file on bad JSON, another type, or
  // ids that collide with the byte range or exceed vocab_size.
  static std::unique_ptr<ByteTokenizer> from_json_file(const std::filesystem::path& file);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::string decode_with_special_tokens(std::span<const int32_t> ids) const override;
  int32_t bos() const override { return bos_; }
  int32_t eos() const override { return eos_; }
  uint32_t vocab_size() const override { return vocab_size_; }
  std::string_view kind() const override { return "byte"; }

 private:
  int32_t byte_offset_;
  int32_t bos_;
  int32_t eos_;
  uint32_t vocab_size_;
  std::map<int32_t, std::string> special_text_;
};

}  // namespace headway::core
