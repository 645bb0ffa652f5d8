#include "headway/serving/bench/completion_chunk.h"

#include <fmt/format.h>
#include <headway/core/error.h>

#include <cstdint>
#include <nlohmann/json.hpp>

namespace headway::serving::bench {

namespace {

using nlohmann::json;

std::string excerpt(std::string_view data) {
  constexpr size_t kMax = 120;
  return data.size() <= kMax ? std::string(data) : std::string(data.substr(0, kMax)) + "...";
}

std::optional<uint32_t> count_of(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) throw core::Error(fmt::format("'{}' is not an array", key));
  return static_cast<uint32_t>(it->size());
}

std::string error_message(const json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (error.is_object()) {
    auto message = error.find("message");
    if (message != error.end() && message->is_string()) return message->get<std::string>();
  }
  return error.dump();
}

CompletionChunk parse_object(const json& doc, bool keep_ids) {
  CompletionChunk chunk;
  if (auto error = doc.find("error"); error != doc.end() && !error->is_null()) {
    chunk.error = error_message(*error);
    return chunk;
  }
  if (auto usage = doc.find("usage"); usage != doc.end() && !usage->is_null()) {
    if (!usage->is_object()) throw core::Error("'usage' is not an object");
    if (auto tokens = usage->find("completion_tokens"); tokens != usage->end()) {
      if (!tokens->is_number_unsigned()) {
        throw core::Error("'usage.completion_tokens' is not a non-negative integer");
      }
      chunk.usage_completion_tokens = tokens->get<uint32_t>();
    }
    if (auto details = usage->find("prompt_tokens_details");
        details != usage->end() && !details->is_null()) {
      if (!details->is_object())
        throw core::Error("'usage.prompt_tokens_details' is not an object");
      if (auto cached = details->find("cached_tokens");
          cached != details->end() && !cached->is_null()) {
        if (!cached->is_number_unsigned()) {
          throw core::Error(
              "'usage.prompt_tokens_details.cached_tokens' is not a non-negative integer");
        }
        chunk.usage_cached_tokens = cached->get<uint32_t>();
      }
    }
  }
  auto choices = doc.find("choices");
  if (choices == doc.end() || choices->is_null()) return chunk;
  if (!choices->is_array()) throw core::Error("'choices' is not an array");
  if (choices->empty()) return chunk;
  const json& choice = choices->front();
  if (!choice.is_object()) throw core::Error("'choices[0]' is not an object");
  chunk.has_choice = true;
  if (auto text = choice.find("text"); text != choice.end() && !text->is_null()) {
    if (!text->is_string()) throw core::Error("'choices[0].text' is not a string");
    chunk.text = text->get<std::string>();
  } else if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
    if (auto content = delta->find("content"); content != delta->end() && content->is_string()) {
      chunk.text = content->get<std::string>();
    }
  }
  chunk.tokens = count_of(choice, "token_ids");
  if (keep_ids && chunk.tokens && *chunk.tokens > 0) {
    const json& ids = choice["token_ids"];
    chunk.token_ids.reserve(ids.size());
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN ||
          id.get<int64_t>() > INT32_MAX) {
        chunk.token_ids.clear();
        break;
      }
      chunk.token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  if (!chunk.tokens) {
    if (auto logprobs = choice.find("logprobs");
        logprobs != choice.end() && logprobs->is_object()) {
      chunk.tokens = count_of(*logprobs, "tokens");
    }
  }
  if (auto reason = choice.find("finish_reason"); reason != choice.end() && reason->is_string()) {
    chunk.finish_reason = reason->get<std::string>();
  }
  return chunk;
}

}  // namespace

CompletionChunk parse_completion_chunk(std::string_view data, bool keep_ids) {
  json doc = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw core::Error(fmt::format("stream chunk is not a JSON object: '{}'", excerpt(data)));
  }
  try {
    return parse_object(doc, keep_ids);
  } catch (const core::Error& e) {
    throw core::Error(fmt::format("stream chunk: {} in '{}'", e.what(), excerpt(data)));
  } catch (const json::exception& e) {
    throw core::Error(fmt::format("stream chunk: {} in '{}'", e.what(), excerpt(data)));
  }
}

}  // namespace headway::serving::bench
