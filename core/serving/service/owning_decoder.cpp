#include "owning_decoder.h"

#include <headway/serving/text_decoder.h>

#include <algorithm>
#include <optional>

namespace headway::serving {
namespace {

class OwningDecoder final : public IncrementalDecoder {
 public:
  OwningDecoder(std::shared_ptr<const core::Tokenizer> tokenizer,
                std::vector<std::string> stop_strings, std::vector<int32_t> stop_token_ids)
      : tokenizer_(std::move(tokenizer)),
        decoder_(make_incremental_decoder(*tokenizer_, std::move(stop_strings),
                                          std::move(stop_token_ids))) {}
  std::string append(std::span<const int32_t> ids) override { return decoder_->append(ids); }
  StopReason stop_reason() const override { return decoder_->stop_reason(); }
  std::string flush() override { return decoder_->flush(); }

 private:
  std::shared_ptr<const core::Tokenizer> tokenizer_;  // declared first: outlives decoder_
  std::unique_ptr<IncrementalDecoder> decoder_;
};

class TokenIdDecoder final : public IncrementalDecoder {
 public:
  explicit TokenIdDecoder(std::vector<int32_t> stop_token_ids)
      : stop_token_ids_(std::move(stop_token_ids)) {}
  std::string append(std::span<const int32_t> ids) override {
    // A stop token ends the request, so only the last id can be one.
    if (!ids.empty() && std::find(stop_token_ids_.begin(), stop_token_ids_.end(), ids.back()) !=
                            stop_token_ids_.end()) {
      stop_token_ = ids.back();
    }
    return {};
  }
  StopReason stop_reason() const override {
    return stop_token_ ? StopReason(*stop_token_) : StopReason();
  }
  std::string flush() override { return {}; }

 private:
  const std::vector<int32_t> stop_token_ids_;
  std::optional<int32_t> stop_token_;
};

}  // namespace

std::unique_ptr<IncrementalDecoder> make_token_id_decoder(std::vector<int32_t> stop_token_ids) {
  return std::make_unique<TokenIdDecoder>(std::move(stop_token_ids));
}

std::unique_ptr<IncrementalDecoder> make_decoder(std::shared_ptr<const core::Tokenizer> tokenizer,
                                                 std::vector<std::string> stop_strings,
                                                 std::vector<int32_t> stop_token_ids) {
  return std::make_unique<OwningDecoder>(std::move(tokenizer), std::move(stop_strings),
                                         std::move(stop_token_ids));
}

}  // namespace headway::serving
