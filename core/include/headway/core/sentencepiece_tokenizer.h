// SentencePiece models (tokenizer.model), through Debian's libsentencepiece.
//
// Ownership: owns the processor. Threading: SentencePieceProcessor's encode/decode are const and
// thread-safe, so every const method here is too.
#pragma once

#include <headway/core/tokenizer.h>

#include <memory>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace headway::core {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Throws Error(HW_INVALID_ARGUMENT) naming the file when it cannot be loaded.
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::string decode_with_special_tokens(std::span<const int32_t> ids) const override;
  int32_t bos() const override;
  int32_t eos() const override;
  uint32_t vocab_size() const override;
  std::string_view kind() const override { return "sentencepiece"; }
  bool drops_first_space() const override { return true; }
  bool decodes_incomplete_characters_as_replacement() const override { return true; }

 private:
  // Appends the text of in-range ids (control pieces give none).
  void decode_pieces(const std::vector<int>& ids, std::string& text) const;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace headway::core
