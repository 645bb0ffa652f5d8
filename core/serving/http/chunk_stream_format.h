// The completions and chat APIs' streams: "data: <chunk>" events of "text_completion" or
// "chat.completion.chunk" objects (a chat stream opens with one role chunk per choice), with
// include_usage a usage chunk, then "data: [DONE]". A failure is an OpenAI error object, then
// [DONE].
//
// Threading: as StreamFormat.
#pragma once

#include "openai_response.h"
#include "stream_format.h"

namespace headway::serving::http {

class ChunkStreamFormat : public StreamFormat {
 public:
  explicit ChunkStreamFormat(ResponseHeader header) : header_(std::move(header)) {}

  std::string opening(uint32_t choices, const Usage& usage) override;
  std::string delta(const StreamDelta& delta) override;
  std::string closing(const Usage& usage) override;
  std::string failure(const ApiError& error) override;

 private:
  const ResponseHeader header_;
};

}  // namespace headway::serving::http
