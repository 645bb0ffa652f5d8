// Hugging Face BPE tokenizers (tokenizer.json with model.type "BPE"): byte-level, as the Llama 3
// family and GPT-2 style models ship them, and SentencePiece-style (no ByteLevel step: Llama 2,
// Mistral, Mixtral), whose symbols are characters with <0xXX> tokens for bytes outside the
// vocabulary (byte_fallback) or an unknown token (fuse_unk), a space written '▁' by a Prepend +
// Replace normalizer or a Metaspace pre-tokenizer, and a decoder of Replace, ByteFallback, Fuse and
// Strip steps or Metaspace (text_steps.h; docs/serving_text.md lists what each reads). Supported,
// and checked at load:
// - model: vocab, merges ("a b" strings or ["a", "b"] pairs), ignore_merges; byte_fallback,
//   unk_token and fuse_unk in SentencePiece-style BPE only; no dropout, no subword prefix/suffix;
// - added_tokens: matched in the text before pre-tokenization (longest first), those with
//   `normalized: false` in the text as given, then the others in each stretch between those once
//   it is normalized (Hugging Face's two passes); special ones decode to nothing
//   (decode_with_special_tokens writes them). A token decodes as the ByteLevel decoder has it: the
//   bytes its content's symbols stand for when every character is one of the byte-level
//   alphabet's, else its content;
// - normalizer: none, NFC (Qwen 2 family), Prepend, Replace of a String, or a Sequence of them,
//   applied to each stretch between the added tokens matched first;
// - pre_tokenizer: Split (Regex or String pattern, behavior "Isolated") and ByteLevel (with its
//   GPT-2 pattern when use_regex; add_prefix_space puts a space before each piece the steps
//   before it made), alone or in a Sequence ending in ByteLevel; SentencePiece-style: none or
//   Metaspace;
// - decoder: ByteLevel; SentencePiece-style: Metaspace, or a Sequence of Replace, ByteFallback
//   (bytes as they are), Fuse and Strip. post_processor is ignored: encode() never adds BOS
//   (Tokenizer's contract).
// BOS/EOS come from tokenizer_config.json (bos_token/eos_token, a string or {"content": ...}) and
// otherwise from config.json (bos_token_id/eos_token_id; the first of a list).
// Anything else is refused with an Error naming the file and the field.
//
// Ownership: owns its tables and the compiled pre-tokenizer patterns. Threading: immutable after
// load; every const method is safe to call concurrently.
#pragma once

#include <headway/core/tokenizer.h>

#include <memory>
#include <nlohmann/json_fwd.hpp>

namespace headway::core {

class BpeTokenizer final : public Tokenizer {
 public:
  // Reads checkpoint_dir/tokenizer.json, and tokenizer_config.json / config.json when present.
  static std::unique_ptr<BpeTokenizer> load(const std::filesystem::path& checkpoint_dir);
  // The same, with checkpoint_dir/tokenizer.json already parsed (the factory parses it once to
  // read its type; a Llama 3 tokenizer.json is 9 MB).
  static std::unique_ptr<BpeTokenizer> load(const std::filesystem::path& checkpoint_dir,
                                            const nlohmann::json& tokenizer_json);
  ~BpeTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::string decode_with_special_tokens(std::span<const int32_t> ids) const override;
  int32_t bos() const override;
  bool adds_bos() const override;
  int32_t eos() const override;
  uint32_t vocab_size() const override;
  std::string_view kind() const override { return "bpe"; }
  bool drops_first_space() const override;
  std::string special_token_text(int32_t id) const override;

  struct Tables;  // defined in bpe_tokenizer.cpp

 private:
  explicit BpeTokenizer(std::unique_ptr<const Tables> tables);
  std::unique_ptr<const Tables> tables_;
};

}  // namespace headway::core
