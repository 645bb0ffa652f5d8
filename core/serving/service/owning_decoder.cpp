#include "owning_decoder.h"

#include <headway/serving/text_decoder.h>

#include <optional>

namespace headway::serving {
namespace {

class OwningDecoder final : public IncrementalDecoder {
 public:
  OwningDecoder(std::shared_ptr<const core::Tokenizer> tokenizer, DecodeOptions options)
      : tokenizer_(std::move(tokenizer)),
        decoder_(make_incremental_decoder(*tokenizer_, std::move(options))) {}
  std::string append(std::span<const int32_t> ids) override { return decoder_->append(ids); }
  StopReason stop_reason() const override { return decoder_->stop_reason(); }
  size_t ids_before_stop() const override { return decoder_->ids_before_stop(); }
  std::string flush() override { return decoder_->flush(); }
  std::string token_bytes(int32_t id) const override { return decoder_->token_bytes(id); }

 private:
  std::shared_ptr<const core::Tokenizer> tokenizer_;  // declared first: outlives decoder_
  std::unique_ptr<IncrementalDecoder> decoder_;
};

class TokenIdDecoder final : public IncrementalDecoder {
 public:
  explicit TokenIdDecoder(DecodeOptions options)
      : stop_token_ids_(std::move(options.stop_token_ids)),
        min_tokens_(options.min_tokens),
        end_of_sequence_(options.end_of_sequence) {}
  std::string append(std::span<const int32_t> ids) override {
    if (const std::optional<int32_t> stop =
            trailing_stop_token(ids, stop_token_ids_, appended_, min_tokens_)) {
      stop_token_ = stop;
    }
    appended_ += ids.size();
    return {};
  }
  StopReason stop_reason() const override { return stop_reason_of(stop_token_, end_of_sequence_); }
  size_t ids_before_stop() const override { return 0; }  // no text, so no stop string
  std::string flush() override { return {}; }
  std::string token_bytes(int32_t) const override { return {}; }

 private:
  const std::vector<int32_t> stop_token_ids_;
  const uint32_t min_tokens_;
  const int32_t end_of_sequence_;
  size_t appended_ = 0;
  std::optional<int32_t> stop_token_;
};

}  // namespace

std::unique_ptr<IncrementalDecoder> make_token_id_decoder(DecodeOptions options) {
  return std::make_unique<TokenIdDecoder>(std::move(options));
}

std::unique_ptr<IncrementalDecoder> make_decoder(std::shared_ptr<const core::Tokenizer> tokenizer,
                                                 DecodeOptions options) {
  return std::make_unique<OwningDecoder>(std::move(tokenizer), std::move(options));
}

}  // namespace headway::serving
