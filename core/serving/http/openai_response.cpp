#include "openai_response.h"

namespace headway::serving::http {
namespace {

const char* object_name(const ResponseHeader& header, bool chunk) {
  if (header.endpoint == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

nlohmann::ordered_json envelope(const ResponseHeader& header, bool chunk) {
  return {{"id", header.id},
          {"object", object_name(header, chunk)},
          {"created", header.created},
          {"model", header.model}};
}

nlohmann::ordered_json chunk_envelope(const ResponseHeader& header, nlohmann::ordered_json choice,
                                      const Usage& usage) {
  nlohmann::ordered_json body = envelope(header, true);
  body["choices"] = nlohmann::ordered_json::array({std::move(choice)});
  // OpenAI: with include_usage, every chunk but the last carries "usage": null; vLLM's
  // continuous_usage_stats puts the usage so far there instead.
  if (header.include_usage) body["usage"] = header.continuous_usage ? usage_json(usage) : nullptr;
  return body;
}

// OpenAI's tool_calls list; a stream's entries also carry their "index" within the choice.
nlohmann::ordered_json tool_calls_json(std::span<const ToolCall> calls, uint32_t first_index,
                                       bool streamed) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    nlohmann::ordered_json call;
    if (streamed) call["index"] = first_index + i;
    call["id"] = calls[i].id;
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    list.push_back(std::move(call));
  }
  return list;
}

}  // namespace

nlohmann::ordered_json finish_reason_json(Finish finish, bool called_tools) {
  if (called_tools && finish != Finish::kNone) return "tool_calls";
  switch (finish) {
    case Finish::kLength:
      return "length";
    case Finish::kStop:
      return "stop";
    default:
      return nullptr;
  }
}

nlohmann::ordered_json stop_reason_json(const StopReason& reason) {
  if (const auto* text = std::get_if<std::string>(&reason)) return *text;
  if (const auto* token = std::get_if<int32_t>(&reason)) return *token;
  return nullptr;
}

nlohmann::ordered_json usage_json(const Usage& usage) {
  // prompt_tokens_details.cached_tokens as OpenAI reports it (vLLM behind a flag): always, so
  // that a client can tell a prefix-cache hit from a slow prefill.
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}}};
}

nlohmann::ordered_json completion_json(const ResponseHeader& header,
                                       std::span<const ChoiceOutput> choices, const Usage& usage) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutput& output = choices[i];
    nlohmann::ordered_json choice = {{"index", i}};
    if (header.endpoint == Endpoint::kCompletions) {
      choice["text"] = output.text;
    } else {
      nlohmann::ordered_json message = {{"role", "assistant"}};
      // OpenAI's and vLLM's shape: no text beside calls, or from a parsed reasoning answer, is a
      // null content.
      const bool parts = !output.tool_calls.empty() || output.reasoning.has_value();
      message["content"] = output.text.empty() && parts && !output.echoed
                               ? nlohmann::ordered_json(nullptr)
                               : nlohmann::ordered_json(output.text);
      if (output.reasoning) {
        // vLLM's current name and the older one (DeepSeek's), which many clients still read.
        const nlohmann::ordered_json reasoning = output.reasoning->empty()
                                                     ? nlohmann::ordered_json(nullptr)
                                                     : nlohmann::ordered_json(*output.reasoning);
        message["reasoning"] = reasoning;
        message["reasoning_content"] = reasoning;
      }
      if (!output.tool_calls.empty()) {
        message["tool_calls"] = tool_calls_json(output.tool_calls, 0, /*streamed=*/false);
      }
      choice["message"] = std::move(message);
    }
    if (header.return_token_ids) choice["token_ids"] = output.token_ids;
    choice["logprobs"] = output.logprobs;
    choice["finish_reason"] = finish_reason_json(output.finish, !output.tool_calls.empty());
    choice["stop_reason"] = stop_reason_json(output.stop_reason);
    if (header.prompt_logprobs && header.endpoint == Endpoint::kCompletions) {
      choice["prompt_logprobs"] = output.prompt_logprobs;
    }
    if (header.return_token_ids && header.endpoint == Endpoint::kCompletions) {
      choice["prompt_token_ids"] = output.prompt_token_ids;
    }
    list.push_back(std::move(choice));
  }
  nlohmann::ordered_json body = envelope(header, false);
  body["choices"] = std::move(list);
  body["usage"] = usage_json(usage);
  // vLLM's chat answer carries them once, beside the choices (every choice has the same prompt).
  if (header.prompt_logprobs && header.endpoint == Endpoint::kChatCompletions) {
    body["prompt_logprobs"] = choices.empty() ? nullptr : choices[0].prompt_logprobs;
  }
  if (header.return_token_ids && header.endpoint == Endpoint::kChatCompletions) {
    body["prompt_token_ids"] = choices.empty()
                                   ? nlohmann::ordered_json::array()
                                   : nlohmann::ordered_json(choices[0].prompt_token_ids);
  }
  return body;
}

nlohmann::ordered_json role_chunk_json(const ResponseHeader& header, uint32_t index,
                                       const Usage& usage,
                                       std::span<const int32_t> prompt_token_ids) {
  nlohmann::ordered_json body = chunk_envelope(header,
                                               {{"index", index},
                                                {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                {"logprobs", nullptr},
                                                {"finish_reason", nullptr},
                                                {"stop_reason", nullptr}},
                                               usage);
  if (header.return_token_ids) body["prompt_token_ids"] = prompt_token_ids;
  return body;
}

nlohmann::ordered_json delta_chunk_json(const ResponseHeader& header, uint32_t index,
                                        std::string_view text, std::span<const int32_t> token_ids,
                                        Finish finish, const StopReason& stop_reason,
                                        const Usage& usage, nlohmann::ordered_json logprobs,
                                        const ParsedDelta& parsed,
                                        std::span<const int32_t> prompt_token_ids) {
  nlohmann::ordered_json choice = {{"index", index}};
  if (header.endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else {
    nlohmann::ordered_json delta = nlohmann::ordered_json::object();
    if (!text.empty()) delta["content"] = text;
    if (!parsed.reasoning.empty()) {
      delta["reasoning"] = parsed.reasoning;
      delta["reasoning_content"] = parsed.reasoning;
    }
    if (!parsed.calls.empty()) {
      delta["tool_calls"] =
          tool_calls_json(parsed.calls, parsed.first_call_index, /*streamed=*/true);
    }
    choice["delta"] = std::move(delta);
  }
  if (header.return_token_ids) choice["token_ids"] = token_ids;
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason_json(finish, parsed.called_tools);
  choice["stop_reason"] = stop_reason_json(stop_reason);
  if (!prompt_token_ids.empty()) choice["prompt_token_ids"] = prompt_token_ids;
  return chunk_envelope(header, std::move(choice), usage);
}

nlohmann::ordered_json usage_chunk_json(const ResponseHeader& header, const Usage& usage) {
  nlohmann::ordered_json body = envelope(header, true);
  body["choices"] = nlohmann::ordered_json::array();
  body["usage"] = usage_json(usage);
  return body;
}

std::string dump_json(const nlohmann::ordered_json& body) {
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string sse_event(const nlohmann::ordered_json& body) {
  return "data: " + dump_json(body) + "\n\n";
}

}  // namespace headway::serving::http
