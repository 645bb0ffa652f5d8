#include "responses_stream_format.h"

#include <headway/serving/random_bits.h>

#include "api_error.h"
#include "reasoning_parser.h"

namespace headway::serving::http {
namespace {

// `more`: a delta's logprobs (null when not asked for).
void append(nlohmann::ordered_json& list, const nlohmann::ordered_json* more) {
  if (more == nullptr || !more->is_array()) return;
  for (const auto& entry : *more) list.push_back(entry);
}

// OpenAI's error codes for a failed response.
const char* failure_code(int status) {
  if (status == 429) return "rate_limit_exceeded";
  if (status >= 400 && status < 500) return "invalid_prompt";
  return "server_error";
}

}  // namespace

std::string ResponsesStreamFormat::event(const char* type, nlohmann::ordered_json body) {
  nlohmann::ordered_json typed = {{"type", type}};
  for (auto& [key, value] : body.items()) typed[key] = std::move(value);
  typed["sequence_number"] = sequence_++;
  return std::string("event: ") + type + "\n" + sse_event(typed);
}

nlohmann::ordered_json ResponsesStreamFormat::item_event_fields() const {
  return {{"item_id", item_id_}, {"output_index", output_.size()}, {"content_index", 0}};
}

std::string ResponsesStreamFormat::opening(uint32_t /*choices*/, const Usage& /*usage*/) {
  const nlohmann::ordered_json response =
      response_json(head_, ResponseStatus::kInProgress, nlohmann::ordered_json::array(), nullptr);
  std::string events = event("response.created", {{"response", response}});
  return events + event("response.in_progress", {{"response", response}});
}

void ResponsesStreamFormat::open(OpenItem item, std::string& events) {
  if (open_ == item) return;
  close_item(events);
  open_ = item;
  item_text_.clear();
  item_logprobs_ = nlohmann::ordered_json::array();
  const bool reasoning = item == OpenItem::kReasoning;
  item_id_ = random_request_id(reasoning ? "rs_" : "msg_");
  events +=
      event("response.output_item.added",
            {{"output_index", output_.size()},
             {"item", reasoning ? reasoning_item_json(item_id_, "", ResponseStatus::kInProgress)
                                : message_item_json(item_id_, ResponseStatus::kInProgress,
                                                    nlohmann::ordered_json::array())}});
  nlohmann::ordered_json part_added = item_event_fields();
  part_added["part"] =
      reasoning ? reasoning_text_json("") : output_text_json("", nlohmann::ordered_json::array());
  events += event("response.content_part.added", std::move(part_added));
}

void ResponsesStreamFormat::close_item(std::string& events, ResponseStatus status) {
  if (open_ == OpenItem::kNone) return;
  // Tokens held back at a message's end made none of its text. Those held while thinking (the
  // end tag, a character split after it) go with the text that follows.
  if (open_ == OpenItem::kMessage) pending_logprobs_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json item;
  nlohmann::ordered_json part;
  nlohmann::ordered_json done = item_event_fields();
  done["text"] = item_text_;
  if (open_ == OpenItem::kReasoning) {
    events += event("response.reasoning_text.done", std::move(done));
    part = reasoning_text_json(item_text_);
    item = reasoning_item_json(item_id_, item_text_, status);
  } else {
    part = output_text_json(item_text_, item_logprobs_);
    done["logprobs"] = item_logprobs_;
    events += event("response.output_text.done", std::move(done));
    item = message_item_json(item_id_, status, nlohmann::ordered_json::array({part}));
  }
  nlohmann::ordered_json part_done = item_event_fields();
  part_done["part"] = std::move(part);
  events += event("response.content_part.done", std::move(part_done));
  events += event("response.output_item.done", {{"output_index", output_.size()}, {"item", item}});
  output_.push_back(std::move(item));
  open_ = OpenItem::kNone;
}

void ResponsesStreamFormat::add_call(const ToolCall& call, std::string& events) {
  close_item(events);
  const std::string id = random_request_id("fc_");
  const size_t index = output_.size();
  events += event("response.output_item.added",
                  {{"output_index", index},
                   {"item", function_call_item_json(id, call, ResponseStatus::kInProgress)}});
  // A call is found whole, so its arguments go out in one delta.
  events += event("response.function_call_arguments.delta",
                  {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
  events += event("response.function_call_arguments.done", {{"item_id", id},
                                                            {"output_index", index},
                                                            {"name", call.name},
                                                            {"arguments", call.arguments}});
  nlohmann::ordered_json item = function_call_item_json(id, call, ResponseStatus::kCompleted);
  events += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
}

std::string ResponsesStreamFormat::delta(const StreamDelta& delta) {
  std::string events;
  if (!delta.parsed.reasoning.empty()) {
    // Tokens held before a read that still thinks were the thinking's.
    pending_logprobs_ = nlohmann::ordered_json::array();
    open(OpenItem::kReasoning, events);
    item_text_ += delta.parsed.reasoning;
    nlohmann::ordered_json fields = item_event_fields();
    fields["delta"] = delta.parsed.reasoning;
    events += event("response.reasoning_text.delta", std::move(fields));
    reasoned_ = true;
  }
  if (!delta.content.empty()) {
    open(OpenItem::kMessage, events);
    append(pending_logprobs_, delta.logprobs);
    item_text_ += delta.content;
    append(item_logprobs_, &pending_logprobs_);
    nlohmann::ordered_json fields = item_event_fields();
    fields["delta"] = delta.content;
    fields["logprobs"] = std::move(pending_logprobs_);
    pending_logprobs_ = nlohmann::ordered_json::array();
    events += event("response.output_text.delta", std::move(fields));
  } else if (delta.parsed.reasoning.empty() && delta.parsed.calls.empty()) {
    // Tokens whose text is held back (part of a character, a possible stop string or tag):
    // their figures go out with the text they make.
    append(pending_logprobs_, delta.logprobs);
  } else {
    // Thinking or a call's markup: not output text, and neither are the tokens held before it.
    pending_logprobs_ = nlohmann::ordered_json::array();
  }
  for (const ToolCall& call : delta.parsed.calls) add_call(call, events);
  if (delta.finish != Finish::kNone) finish_ = delta.finish;
  return events;
}

void ResponsesStreamFormat::generated(uint32_t /*index*/, std::span<const int32_t> token_ids) {
  // Kept until the answer's text starts (the step that ends the thinking arrives while its item
  // is still open): no later token is the thinking's.
  if (open_ == OpenItem::kReasoning || (open_ == OpenItem::kNone && output_.empty())) {
    token_ids_.insert(token_ids_.end(), token_ids.begin(), token_ids.end());
  }
}

uint32_t ResponsesStreamFormat::reasoning_tokens() const {
  if (!reasoned_) return 0;
  const auto ends_thinking = [&](size_t count) {
    return detokenize_(std::span(token_ids_).first(count)).find(kReasoningEnd) != std::string::npos;
  };
  try {
    if (!ends_thinking(token_ids_.size())) return static_cast<uint32_t>(token_ids_.size());
    // The shortest beginning whose text holds the end tag: its tokens are the thinking's.
    size_t low = 1;
    size_t high = token_ids_.size();
    while (low < high) {
      const size_t middle = low + (high - low) / 2;
      if (ends_thinking(middle)) {
        high = middle;
      } else {
        low = middle + 1;
      }
    }
    return static_cast<uint32_t>(low);
  } catch (const std::exception&) {
    return 0;  // no text for the ids (no tokenizer): not counted
  }
}

std::string ResponsesStreamFormat::closing(const Usage& usage) {
  std::string events;
  const ResponseStatus status =
      finish_ == Finish::kLength ? ResponseStatus::kIncomplete : ResponseStatus::kCompleted;
  // An answer of nothing is still a message, as a chat answer's content is "".
  if (output_.empty() && open_ == OpenItem::kNone) open(OpenItem::kMessage, events);
  close_item(events, status);
  response_ =
      response_json(head_, status, output_, responses_usage_json(usage, reasoning_tokens()));
  if (keep_) {
    bool kept = false;
    try {
      kept = keep_(response_);
    } catch (const std::exception&) {
      // Not kept (no memory for it): the answer still goes out, and says so.
    }
    if (!kept) response_["store"] = false;
  }
  // response.completed whatever the status, as vLLM sends it: OpenAI ends an incomplete response
  // with response.incomplete, which the OpenAI SDK's stream helper (get_final_response) does not
  // take as an end.
  return events + event("response.completed", {{"response", response_}});
}

std::string ResponsesStreamFormat::failure(const ApiError& error) {
  failed_ = renames_->apply(error);
  const char* code = failure_code(failed_->status());
  const std::string message = failed_->what();
  // The item the failure cut short ends too, as written so far.
  std::string events;
  close_item(events, ResponseStatus::kIncomplete);
  response_ = response_json(head_, ResponseStatus::kFailed, output_, nullptr,
                            {{"code", code}, {"message", message}});
  response_["store"] = false;  // a failed response is not kept
  const nlohmann::ordered_json param = failed_->param().empty()
                                           ? nlohmann::ordered_json(nullptr)
                                           : nlohmann::ordered_json(failed_->param());
  events += event("error", {{"code", code}, {"message", message}, {"param", param}});
  return events + event("response.failed", {{"response", response_}});
}

}  // namespace headway::serving::http
