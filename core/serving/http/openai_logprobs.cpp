#include "openai_logprobs.h"

#include <headway/core/utf8.h>

#include <algorithm>
#include <string>

namespace headway::serving::http {
namespace {

std::string text_of(const std::string& bytes) {
  std::string text;
  core::utf8::append_valid(bytes, text);
  return text;
}

nlohmann::ordered_json chat_candidate(const TokenCandidate& candidate) {
  nlohmann::ordered_json bytes = nlohmann::ordered_json::array();
  for (const char c : candidate.bytes) bytes.push_back(static_cast<unsigned char>(c));
  return {{"token", text_of(candidate.bytes)},
          {"logprob", candidate.logprob},
          {"bytes", std::move(bytes)}};
}

}  // namespace

nlohmann::ordered_json LogprobsJson::value(std::span<const GeneratedLogprobs> tokens) {
  if (!asked()) return nullptr;
  switch (endpoint_) {
    case Endpoint::kCompletions:
      return completions(tokens);
    case Endpoint::kChatCompletions:
      return chat(tokens);
    case Endpoint::kResponses:
      return std::move(chat(tokens)["content"]);
  }
  return nullptr;
}

nlohmann::ordered_json prompt_logprobs_json(std::span<const PromptLogprobs> prompt, int32_t top) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  const auto entry = [](const TokenCandidate& candidate, uint32_t rank) {
    return nlohmann::ordered_json{{"logprob", candidate.logprob},
                                  {"rank", rank},
                                  {"decoded_token", text_of(candidate.bytes)}};
  };
  for (const PromptLogprobs& position : prompt) {
    if (!position.has_figures) {
      list.push_back(nullptr);
      continue;
    }
    nlohmann::ordered_json figures = nlohmann::ordered_json::object();
    figures[std::to_string(position.token.token)] = entry(position.token, position.rank);
    const size_t listed = std::min(position.top.size(), static_cast<size_t>(std::max(top, 0)));
    for (size_t i = 0; i < listed; ++i) {
      const std::string key = std::to_string(position.top[i].token);
      // The top list is in rank order (ties to the lower id), so its i-th entry ranks i + 1.
      if (!figures.contains(key))
        figures[key] = entry(position.top[i], static_cast<uint32_t>(i + 1));
    }
    list.push_back(std::move(figures));
  }
  return list;
}

nlohmann::ordered_json LogprobsJson::CompletionsArrays::json() {
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

void LogprobsJson::add(CompletionsArrays& arrays, const TokenCandidate& token,
                       std::span<const TokenCandidate> top, bool has_figures) {
  const std::string text = text_of(token.bytes);
  arrays.offsets.push_back(text_offset_);
  text_offset_ += core::utf8::code_points(text);  // Python's len() of the text
  arrays.texts.push_back(text);
  if (!has_figures) {
    arrays.logprobs.push_back(nullptr);
    arrays.tops.push_back(nullptr);
    return;
  }
  arrays.logprobs.push_back(token.logprob);
  // Tokens whose texts are the same share a key: the most likely of the top ones keeps it,
  // unless one is the token itself, whose log-probability the key then shows.
  nlohmann::ordered_json tops = nlohmann::ordered_json::object();
  for (const TokenCandidate& candidate :
       top.first(std::min(top.size(), static_cast<size_t>(top_)))) {
    const std::string key = text_of(candidate.bytes);
    if (!tops.contains(key)) tops[key] = candidate.logprob;
  }
  tops[text] = token.logprob;
  arrays.tops.push_back(std::move(tops));
}

nlohmann::ordered_json LogprobsJson::completions(std::span<const GeneratedLogprobs> tokens) {
  CompletionsArrays arrays;
  for (const GeneratedLogprobs& token : tokens) add(arrays, token.chosen, token.top, true);
  return arrays.json();
}

nlohmann::ordered_json LogprobsJson::echoed(std::span<const PromptLogprobs> prompt,
                                            std::span<const GeneratedLogprobs> tokens) {
  if (!asked()) return nullptr;
  CompletionsArrays arrays;
  for (const PromptLogprobs& token : prompt) {
    add(arrays, token.token, token.top, token.has_figures);
  }
  for (const GeneratedLogprobs& token : tokens) add(arrays, token.chosen, token.top, true);
  return arrays.json();
}

nlohmann::ordered_json LogprobsJson::chat(std::span<const GeneratedLogprobs> tokens) const {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  for (const GeneratedLogprobs& token : tokens) {
    nlohmann::ordered_json entry = chat_candidate(token.chosen);
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const TokenCandidate& candidate : token.top) top.push_back(chat_candidate(candidate));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

}  // namespace headway::serving::http
