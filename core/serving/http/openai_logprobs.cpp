#include "openai_logprobs.h"

#include <headway/core/utf8.h>

#include <string>

namespace headway::serving::http {
namespace {

std::string text_of(const std::string& bytes) {
  std::string text;
  core::utf8::append_valid(bytes, text);
  return text;
}

// Characters (code points) of valid UTF-8: what a client's string length counts in Python.
size_t characters(const std::string& text) {
  size_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return count;
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
  return endpoint_ == Endpoint::kCompletions ? completions(tokens) : chat(tokens);
}

nlohmann::ordered_json LogprobsJson::completions(std::span<const GeneratedLogprobs> tokens) {
  nlohmann::ordered_json texts = nlohmann::ordered_json::array();
  nlohmann::ordered_json logprobs = nlohmann::ordered_json::array();
  nlohmann::ordered_json tops = nlohmann::ordered_json::array();
  nlohmann::ordered_json offsets = nlohmann::ordered_json::array();
  for (const GeneratedLogprobs& token : tokens) {
    const std::string text = text_of(token.chosen.bytes);
    offsets.push_back(text_offset_);
    text_offset_ += characters(text);
    logprobs.push_back(token.chosen.logprob);
    // Tokens whose texts are the same share a key: the most likely of the top ones keeps it,
    // unless one is the generated token, whose log-probability the key then shows.
    nlohmann::ordered_json top = nlohmann::ordered_json::object();
    for (const TokenCandidate& candidate : token.top) {
      const std::string key = text_of(candidate.bytes);
      if (!top.contains(key)) top[key] = candidate.logprob;
    }
    top[text] = token.chosen.logprob;
    tops.push_back(std::move(top));
    texts.push_back(text);
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
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
