#include "headway/core/sentencepiece_tokenizer.h"

#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <sentencepiece_processor.h>

namespace headway::core {

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  // The library opens whatever it is given: a FIFO blocked it for ever (helper-151's fuzzer).
  std::error_code ignored;
  if (!std::filesystem::is_regular_file(model_file, ignored)) {
    throw Error(model_file.string() + ": cannot open: " + unreadable_reason(model_file));
  }
  const auto status = processor_->Load(model_file.string());
  if (!status.ok()) {
    throw Error(model_file.string() + ": cannot load SentencePiece model: " + status.ToString());
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) throw Error("sentencepiece: encode failed: " + status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  // SentencePiece decodes control pieces (BOS/EOS) to nothing; out-of-range ids are dropped
  // here because the library rejects the whole call on one.
  std::vector<int> valid;
  valid.reserve(ids.size());
  const int size = processor_->GetPieceSize();
  for (int32_t id : ids) {
    if (id >= 0 && id < size) valid.push_back(id);
  }
  std::string text;
  decode_pieces(valid, text);
  return text;
}

std::string SentencePieceTokenizer::decode_with_special_tokens(std::span<const int32_t> ids) const {
  // Control pieces (BOS, EOS, Mistral's [INST] and [TOOL_CALLS]) are written as their piece; the
  // runs between them decode as decode() does, except that a run after a control piece keeps the
  // space its first piece starts with ("<s> Hello"), which SentencePiece drops at the start of
  // what it decodes and Hugging Face's fast tokenizers (vLLM's) keep after a special token.
  std::string text;
  std::vector<int> run;
  bool after_control = false;
  const auto flush_run = [&] {
    const size_t start = text.size();
    decode_pieces(run, text);
    if (after_control && !run.empty() &&
        processor_->IdToPiece(run.front()).starts_with("\xE2\x96\x81") &&  // U+2581, a space
        (text.size() == start || text[start] != ' ')) {
      text.insert(start, 1, ' ');
    }
    run.clear();
  };
  const int size = processor_->GetPieceSize();
  for (int32_t id : ids) {
    if (id < 0 || id >= size) continue;
    if (!processor_->IsControl(id)) {
      run.push_back(id);
      continue;
    }
    flush_run();
    text += processor_->IdToPiece(id);
    after_control = true;
  }
  flush_run();
  return text;
}

void SentencePieceTokenizer::decode_pieces(const std::vector<int>& ids, std::string& text) const {
  if (ids.empty()) return;
  std::string piece_text;
  const auto status = processor_->Decode(ids, &piece_text);
  if (!status.ok()) throw Error("sentencepiece: decode failed: " + status.ToString());
  text += piece_text;
}

int32_t SentencePieceTokenizer::bos() const { return processor_->bos_id(); }
int32_t SentencePieceTokenizer::eos() const { return processor_->eos_id(); }
uint32_t SentencePieceTokenizer::vocab_size() const {
  return static_cast<uint32_t>(processor_->GetPieceSize());
}

namespace {

// Linking headway_tokenizers (an object library, so this file is always linked in) is what makes
// Tokenizer::load accept tokenizer.model; processes that serve gRPC do not link it.
const bool kSentencePieceLoaderInstalled = [] {
  Tokenizer::set_sentencepiece_loader([](const std::filesystem::path& file) {
    return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(file));
  });
  return true;
}();

}  // namespace

}  // namespace headway::core
