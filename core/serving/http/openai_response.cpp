#include "openai_response.h"

namespace headway::serving::http {
namespace {

const char* object_name(const ResponseHeader& header, bool chunk) {
  if (header.endpoint == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

nlohmann::json envelope(const ResponseHeader& header, bool chunk) {
  return {{"id", header.id},
          {"object", object_name(header, chunk)},
          {"created", header.created},
          {"model", header.model}};
}

nlohmann::json chunk_envelope(const ResponseHeader& header, nlohmann::json choice,
                              const Usage& usage) {
  nlohmann::json body = envelope(header, true);
  body["choices"] = nlohmann::json::array({std::move(choice)});
  // OpenAI: with include_usage, every chunk but the last carries "usage": null; vLLM's
  // continuous_usage_stats puts the usage so far there instead.
  if (header.include_usage) body["usage"] = header.continuous_usage ? usage_json(usage) : nullptr;
  return body;
}

}  // namespace

nlohmann::json finish_reason_json(Finish finish) {
  switch (finish) {
    case Finish::kLength:
      return "length";
    case Finish::kStop:
      return "stop";
    default:
      return nullptr;
  }
}

nlohmann::json stop_reason_json(const StopReason& reason) {
  if (const auto* text = std::get_if<std::string>(&reason)) return *text;
  if (const auto* token = std::get_if<int32_t>(&reason)) return *token;
  return nullptr;
}

nlohmann::json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

nlohmann::json completion_json(const ResponseHeader& header, std::span<const ChoiceOutput> choices,
                               const Usage& usage) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutput& output = choices[i];
    nlohmann::json choice = {{"index", i},
                             {"finish_reason", finish_reason_json(output.finish)},
                             {"stop_reason", stop_reason_json(output.stop_reason)},
                             {"logprobs", output.logprobs}};
    if (header.return_token_ids) choice["token_ids"] = output.token_ids;
    if (header.endpoint == Endpoint::kCompletions) {
      choice["text"] = output.text;
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", output.text}};
    }
    list.push_back(std::move(choice));
  }
  nlohmann::json body = envelope(header, false);
  body["choices"] = std::move(list);
  body["usage"] = usage_json(usage);
  return body;
}

nlohmann::json role_chunk_json(const ResponseHeader& header, uint32_t index, const Usage& usage) {
  return chunk_envelope(header,
                        {{"index", index},
                         {"delta", {{"role", "assistant"}, {"content", ""}}},
                         {"logprobs", nullptr},
                         {"finish_reason", nullptr},
                         {"stop_reason", nullptr}},
                        usage);
}

nlohmann::json delta_chunk_json(const ResponseHeader& header, uint32_t index,
                                const std::string& text, std::span<const int32_t> token_ids,
                                Finish finish, const StopReason& stop_reason, const Usage& usage,
                                nlohmann::json logprobs) {
  nlohmann::json choice = {{"index", index}, {"logprobs", std::move(logprobs)}};
  if (header.return_token_ids) choice["token_ids"] = token_ids;
  if (header.endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else {
    choice["delta"] = text.empty() ? nlohmann::json::object() : nlohmann::json{{"content", text}};
  }
  choice["finish_reason"] = finish_reason_json(finish);
  choice["stop_reason"] = stop_reason_json(stop_reason);
  return chunk_envelope(header, std::move(choice), usage);
}

nlohmann::json usage_chunk_json(const ResponseHeader& header, const Usage& usage) {
  nlohmann::json body = envelope(header, true);
  body["choices"] = nlohmann::json::array();
  body["usage"] = usage_json(usage);
  return body;
}

std::string dump_json(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_event(const nlohmann::json& body) { return "data: " + dump_json(body) + "\n\n"; }

}  // namespace headway::serving::http
