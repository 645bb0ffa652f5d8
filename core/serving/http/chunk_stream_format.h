// The completions and chat APIs' streams: "data: <chunk>" events of "text_completion" or
// "chat.completion.chunk" objects (a chat stream opens with one role chunk per choice), with
// include_usage a usage chunk, then "data: [DONE]". A failure is an OpenAI error object, then
// [DONE].
//
// Threading: as StreamFormat.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "openai_response.h"
#include "stream_format.h"

namespace headway::serving::http {

class ChunkStreamFormat : public StreamFormat {
 public:
  // `prompt_token_ids`: with header.return_token_ids, each choice's prompt as run (vLLM's),
  // borrowed from the choices' streams (RequestStream::prompt_ids(), constant once handed out),
  // which must outlive this format: a chat stream's role chunks carry them, a completions
  // choice's first chunk its own.
  explicit ChunkStreamFormat(ResponseHeader header,
                             std::vector<std::span<const int32_t>> prompt_token_ids = {})
      : header_(std::move(header)), prompt_token_ids_(std::move(prompt_token_ids)) {}

  std::string opening(uint32_t choices, const Usage& usage) override;
  std::string delta(const StreamDelta& delta) override;
  std::string closing(const Usage& usage) override;
  std::string failure(const ApiError& error) override;

 private:
  const ResponseHeader header_;
  // Completions: emptied once the choice's first chunk carried them.
  std::vector<std::span<const int32_t>> prompt_token_ids_;
};

}  // namespace headway::serving::http
