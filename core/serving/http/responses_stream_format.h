// The Responses API's stream: typed events ("event: <type>" and its JSON, each with a
// sequence_number), as OpenAI sends them: response.created and response.in_progress; for each
// output item, response.output_item.added, its deltas (reasoning_text, output_text with its
// content_part, function_call_arguments) and their done events, and response.output_item.done;
// then response.completed, whose response's status is "incomplete" when max_output_tokens ended it
// (as vLLM sends it; OpenAI sends response.incomplete then). A failure is an "error" event, then
// response.failed. No "data: [DONE]": the last response event ends the stream.
//
// The response it built stays readable afterwards (response()), so that a request that was not
// streamed is answered by the same code: its events are written and dropped, and its body is the
// final response. Output items come in the order the answer gives them: the reasoning, then the
// text, each call as it completes. Text after a call starts another message item; text and a call
// that come in one step of the stream (several tokens read at once) go out text first.
// Logprobs go with the text their step made, with those of the tokens held back before it (part
// of a character, a possible tag or stop string). A step that made only thinking or calls is not
// listed (its tokens are no output text), nor are the tokens held before a step that still
// thinks; a step that made both thinking and text lists all its tokens.
//
// Threading: as StreamFormat.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "responses_json.h"
#include "stream_format.h"

namespace headway::serving::http {

class ResponsesStreamFormat : public StreamFormat {
 public:
  // The text of generated token ids (the service's detokenize), for counting the reasoning's.
  using Detokenize = std::function<std::string(std::span<const int32_t>)>;
  // Keeps the response that ended (completed or incomplete; a failed one is not kept); false when
  // it could not, and the response then says store false. Called before the last event is
  // written, so that a client that read it can continue the response at once.
  using Keep = std::function<bool(const nlohmann::ordered_json& response)>;

  // `renames`: the request's (a failure names the Responses field). `keep`: empty when the
  // response is not kept (store false).
  ResponsesStreamFormat(ResponseHead head, Detokenize detokenize,
                        std::shared_ptr<const FieldRenames> renames, Keep keep = {})
      : head_(std::move(head)),
        detokenize_(std::move(detokenize)),
        renames_(std::move(renames)),
        keep_(std::move(keep)) {}

  std::string opening(uint32_t choices, const Usage& usage) override;
  void generated(uint32_t index, std::span<const int32_t> token_ids) override;
  std::string delta(const StreamDelta& delta) override;
  std::string closing(const Usage& usage) override;
  std::string failure(const ApiError& error) override;

  // The response as it ended: completed or incomplete after closing(), failed after failure().
  const nlohmann::ordered_json& response() const { return response_; }
  // After failure(): the error, its field renamed as the client wrote it.
  const std::optional<ApiError>& failed() const { return failed_; }

 private:
  enum class OpenItem { kNone, kReasoning, kMessage };

  // One SSE event of `type`; `body` gets its type first and its sequence number last.
  std::string event(const char* type, nlohmann::ordered_json body);
  void open(OpenItem item, std::string& events);
  // Ends the item in progress (with `status` for a message) and adds it to the output.
  void close_item(std::string& events, ResponseStatus status = ResponseStatus::kCompleted);
  void add_call(const ToolCall& call, std::string& events);
  nlohmann::ordered_json item_event_fields() const;
  // output_tokens_details.reasoning_tokens: the tokens up to the one that ends the thinking
  // ("</think>"), all of them when it never ended. A chunk of a stream may hold many tokens, so
  // the count comes from the text of the tokens, not from the chunks the reasoning came in.
  uint32_t reasoning_tokens() const;

  const ResponseHead head_;
  Detokenize detokenize_;
  const std::shared_ptr<const FieldRenames> renames_;
  Keep keep_;
  std::vector<int32_t> token_ids_;  // every token generated, while the answer may reason
  bool reasoned_ = false;           // a reasoning item was written
  uint64_t sequence_ = 0;
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();  // the items that ended
  OpenItem open_ = OpenItem::kNone;
  std::string item_id_;
  std::string item_text_;
  nlohmann::ordered_json item_logprobs_ = nlohmann::ordered_json::array();
  // Logprobs of tokens that made no text yet: they go with the next text, or are dropped when
  // what came of them was thinking or a call.
  nlohmann::ordered_json pending_logprobs_ = nlohmann::ordered_json::array();
  Finish finish_ = Finish::kNone;
  nlohmann::ordered_json response_;
  std::optional<ApiError> failed_;
};

}  // namespace headway::serving::http
