#include "tool_call_parser.h"

#include <headway/serving/json_text.h>
#include <headway/serving/random_bits.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "partial_tag.h"
#include "pythonic_calls.h"

namespace headway::serving::http {
namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
// Llama 3.1's token before a call; decoded as text only when special tokens are kept.
constexpr std::string_view kPythonTag = "<|python_tag|>";
// Llama 4's token before a pythonic call list.
constexpr std::string_view kPythonStart = "<|python_start|>";
constexpr std::string_view kWhitespace = " \t\r\n";
// Mistral's special token before its calls, and (v11 tokenizers) between a call's name and its
// arguments.
constexpr std::string_view kToolCallsTag = "[TOOL_CALLS]";
constexpr std::string_view kArgsTag = "[ARGS]";

bool only_whitespace(std::string_view text) {
  return text.find_first_not_of(kWhitespace) == std::string_view::npos;
}

// One call's JSON: an object with a non-empty string "name" and its arguments under "arguments"
// (hermes) or "parameters" (Llama 3's), an object or the JSON text of one; nullopt when it is not
// one. Arguments of another kind ("x", [1]) make no call: OpenAI's are an object's text, and a
// client sending the call back (or previous_response_id) would be refused for them.
std::optional<ToolCall> call_of(std::string_view json_text) {
  // In the model's key order; too deep to dump safely, or not JSON: not a call.
  const nlohmann::ordered_json call = parse_json_keeping_order(json_text);
  if (!call.is_object()) return std::nullopt;
  const auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::nullopt;
  }
  ToolCall out{random_request_id("chatcmpl-tool-"), name->get<std::string>(), "{}"};
  auto arguments = call.find("arguments");
  if (arguments == call.end()) arguments = call.find("parameters");
  if (arguments == call.end() || arguments->is_null()) return out;
  if (arguments->is_object()) {
    out.arguments = arguments->dump();
  } else if (arguments->is_string()) {
    // A model that wrote the arguments as a JSON string already wrote OpenAI's form ("" is none).
    out.arguments = arguments->get<std::string>();
    if (!out.arguments.empty() && !parse_json_keeping_order(out.arguments).is_object()) {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  return out;
}

bool is_forced(ToolCallFormat format) {
  return format == ToolCallFormat::kNamedArguments || format == ToolCallFormat::kCallList;
}

// tool_choice naming `function`: the answer is its arguments, one JSON object (unless cut short).
std::optional<std::vector<ToolCall>> named_arguments_call(std::string_view text,
                                                          const std::string& function) {
  const nlohmann::ordered_json arguments = parse_json_keeping_order(text);
  if (!arguments.is_object()) return std::nullopt;
  return std::vector<ToolCall>{
      ToolCall{random_request_id("chatcmpl-tool-"), function, arguments.dump()}};
}

// tool_choice "required": the answer is a JSON array of calls, each {"name", "parameters"}.
std::optional<std::vector<ToolCall>> call_list(std::string_view text) {
  const nlohmann::ordered_json list = parse_json_keeping_order(text);
  if (!list.is_array() || list.empty()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const auto& item : list) {
    std::optional<ToolCall> call = item.is_object() ? call_of(item.dump()) : std::nullopt;
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

// Llama 3's answer: "{...}" or "{...}; {...}", after an optional python tag. Every object must be
// a call, or there are none.
std::optional<std::vector<ToolCall>> llama3_calls(std::string_view text) {
  size_t at = text.find_first_not_of(kWhitespace);
  if (at != std::string_view::npos && text.substr(at).starts_with(kPythonTag)) {
    at = text.find_first_not_of(kWhitespace, at + kPythonTag.size());
  }
  std::vector<ToolCall> calls;
  while (at != std::string_view::npos) {
    if (text[at] != '{') return std::nullopt;
    const size_t end = json_container_end(text, at);
    if (end == std::string_view::npos) return std::nullopt;
    std::optional<ToolCall> call = call_of(text.substr(at, end - at));
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    at = text.find_first_not_of(kWhitespace, end);
    if (at == std::string_view::npos) break;
    if (text[at] != ';') return std::nullopt;
    at = text.find_first_not_of(kWhitespace, at + 1);
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Mistral's tool call ids: 9 letters and digits (its chat templates refuse any other form).
std::string mistral_call_id() {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t bits = random_u64();  // 62^9 < 2^54: one draw gives all nine
  std::string id;
  for (int i = 0; i < 9; ++i) {
    id += kAlphabet[bits % kAlphabet.size()];
    bits /= kAlphabet.size();
  }
  return id;
}

// Where the calls that follow a "[TOOL_CALLS]" end in `text` (what came after the tag): past the
// JSON array (tokenizers before v11) or past the arguments object after the name (v11 and later);
// at the next "[TOOL_CALLS]" when one comes before an object opens (not a call). npos while it may
// still go on.
// Whether the calls after a "[TOOL_CALLS]" are a JSON array (before v11): "[" then "{" (or nothing
// yet), not a marker such as another "[TOOL_CALLS]". `at`: the first character after whitespace.
bool is_call_array(std::string_view text, size_t at) {
  if (text[at] != '[') return false;
  const size_t next = text.find_first_not_of(kWhitespace, at + 1);
  return next == std::string_view::npos || text[next] == '{';
}

size_t mistral_calls_end(std::string_view text) {
  const size_t at = text.find_first_not_of(kWhitespace);
  if (at == std::string_view::npos) return std::string_view::npos;
  if (is_call_array(text, at)) return json_container_end(text, at);
  const size_t next_tag = text.find(kToolCallsTag, at);
  const size_t brace = text.find('{', at);
  if (brace == std::string_view::npos || brace > next_tag) return next_tag;
  return json_container_end(text, brace);
}

// The calls of one "[TOOL_CALLS]": a JSON array of {"name", "arguments"} objects, or `name{...}`
// with markers between the name and its arguments that end in "[ARGS]" ("[ARGS]", or
// "[CALL_ID]...[ARGS]"); nullopt when it is neither (then it is content).
std::optional<std::vector<ToolCall>> mistral_calls(std::string_view text) {
  const size_t at = text.find_first_not_of(kWhitespace);
  if (at == std::string_view::npos) return std::nullopt;
  std::vector<ToolCall> calls;
  if (is_call_array(text, at)) {
    const nlohmann::ordered_json list = parse_json_keeping_order(text.substr(at));
    if (!list.is_array() || list.empty()) return std::nullopt;
    for (const auto& item : list) {
      std::optional<ToolCall> call = item.is_object() ? call_of(item.dump()) : std::nullopt;
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
  } else {
    const size_t brace = text.find('{', at);
    if (brace == std::string_view::npos) return std::nullopt;
    const std::string_view before_arguments = text.substr(at, brace - at);
    const size_t markers_at = std::min(before_arguments.find('['), before_arguments.size());
    std::string_view name = before_arguments.substr(0, markers_at);
    name = name.substr(0, name.find_last_not_of(kWhitespace) + 1);
    std::string_view markers = before_arguments.substr(markers_at);
    markers = markers.substr(0, markers.find_last_not_of(kWhitespace) + 1);
    const nlohmann::ordered_json arguments = parse_json_keeping_order(text.substr(brace));
    if (name.empty() || name.find_first_of(kWhitespace) != std::string_view::npos ||
        !(markers.empty() || markers.ends_with(kArgsTag)) || !arguments.is_object()) {
      return std::nullopt;
    }
    calls.push_back(ToolCall{{}, std::string(name), arguments.dump()});
  }
  for (ToolCall& call : calls) call.id = mistral_call_id();
  return calls;
}

// A pythonic answer's calls, with ids.
std::optional<std::vector<ToolCall>> pythonic_tool_calls(std::string_view text) {
  std::optional<std::vector<PythonicCall>> parsed = parse_pythonic_calls(text);
  if (!parsed) return std::nullopt;
  std::vector<ToolCall> calls;
  for (PythonicCall& call : *parsed) {
    calls.push_back(
        {random_request_id("chatcmpl-tool-"), std::move(call.name), std::move(call.arguments)});
  }
  return calls;
}

}  // namespace

std::optional<ToolCallFormat> tool_call_format_named(std::string_view name) {
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  if (name == "pythonic") return ToolCallFormat::kPythonic;
  if (name == "mistral") return ToolCallFormat::kMistral;
  return std::nullopt;
}

void ToolCallParser::emit_text(std::string_view text, std::string& content) {
  if (text.empty()) return;
  if (after_call_) {
    if (only_whitespace(text)) {
      whitespace_ += text;
      return;
    }
    content += whitespace_;
    whitespace_.clear();
    after_call_ = false;
  }
  content += text;
}

void ToolCallParser::add_call(ToolCall call, std::vector<ToolCall>& calls) {
  whitespace_.clear();  // between the call before and this one: not content
  after_call_ = true;
  if (single_call_ && called_) return;
  called_ = true;
  if (mistral_ids_) call.id = mistral_call_id();
  calls.push_back(std::move(call));
}

void ToolCallParser::feed(std::string_view text, std::string& content,
                          std::vector<ToolCall>& calls) {
  pending_ += text;
  if (is_forced(format_)) {
    state_ = State::kHeld;  // guided decoding shapes the whole answer: read at the end
  } else if (format_ == ToolCallFormat::kHermes) {
    feed_hermes(content, calls);
  } else if (format_ == ToolCallFormat::kMistral) {
    feed_mistral(content, calls, false);
  } else {
    feed_whole_answer(content);
  }
}

void ToolCallParser::feed_hermes(std::string& content, std::vector<ToolCall>& calls) {
  for (;;) {
    if (state_ == State::kText) {
      const size_t open = pending_.find(kCallOpen);
      const size_t text_end = open != std::string::npos
                                  ? open
                                  : pending_.size() - partial_tag_at_end(pending_, kCallOpen);
      emit_text(std::string_view(pending_).substr(0, text_end), content);
      if (open == std::string::npos) {
        pending_.erase(0, text_end);
        return;
      }
      pending_.erase(0, open + kCallOpen.size());
      state_ = State::kInCall;
      continue;
    }
    // Only the new text (and a tag it may complete) is searched: a long call arrives in many
    // pieces.
    const size_t close =
        pending_.find(kCallClose, call_scanned_ - std::min(call_scanned_, kCallClose.size() - 1));
    if (close == std::string::npos) {
      call_scanned_ = pending_.size();
      return;
    }
    call_scanned_ = 0;
    const std::string_view body = std::string_view(pending_).substr(0, close);
    if (std::optional<ToolCall> call = call_of(body)) {
      add_call(std::move(*call), calls);
    } else {
      emit_text(std::string(kCallOpen) + std::string(body) + std::string(kCallClose), content);
    }
    pending_.erase(0, close + kCallClose.size());
    state_ = State::kText;
  }
}

void ToolCallParser::feed_mistral(std::string& content, std::vector<ToolCall>& calls, bool final) {
  for (;;) {
    if (state_ == State::kText) {
      const size_t open = pending_.find(kToolCallsTag);
      const size_t text_end =
          open != std::string::npos
              ? open
              : pending_.size() - (final ? 0 : partial_tag_at_end(pending_, kToolCallsTag));
      emit_text(std::string_view(pending_).substr(0, text_end), content);
      if (open == std::string::npos) {
        pending_.erase(0, text_end);
        return;
      }
      pending_.erase(0, open + kToolCallsTag.size());
      state_ = State::kInCall;
      call_scanned_ = 0;
      continue;
    }
    // The calls can only have ended where a bracket closed (or a tag began) in the new text, so
    // a long call arriving in many pieces is not searched again for each.
    const size_t news = call_scanned_ - std::min(call_scanned_, kToolCallsTag.size() - 1);
    const bool may_end = pending_.find_first_of("]}", news) != std::string::npos ||
                         pending_.find(kToolCallsTag, news) != std::string::npos;
    call_scanned_ = pending_.size();
    size_t end = may_end ? mistral_calls_end(pending_) : std::string::npos;
    if (end == std::string::npos) {
      if (!final) return;
      end = pending_.size();  // the answer ended inside: what was written is content
    }
    const std::string_view written = std::string_view(pending_).substr(0, end);
    if (std::optional<std::vector<ToolCall>> found = mistral_calls(written)) {
      for (ToolCall& call : *found) add_call(std::move(call), calls);
    } else {
      emit_text(std::string(kToolCallsTag) + std::string(written), content);
    }
    pending_.erase(0, end);
    state_ = State::kText;
  }
}

void ToolCallParser::feed_whole_answer(std::string& content) {
  if (state_ == State::kUndecided) {
    const size_t start = pending_.find_first_not_of(kWhitespace);
    if (start == std::string::npos) return;
    const std::string_view rest = std::string_view(pending_).substr(start);
    // What a call list starts with, and the special token that may come first.
    const bool pythonic = format_ == ToolCallFormat::kPythonic;
    const char opening = pythonic ? '[' : '{';
    const std::string_view tag = pythonic ? kPythonStart : kPythonTag;
    if (rest.starts_with(opening) || rest.starts_with(tag)) {
      state_ = State::kHeld;
    } else if (tag.starts_with(rest)) {
      return;  // maybe the tag, cut short
    } else {
      state_ = State::kText;
    }
  }
  if (state_ == State::kText) {
    content += pending_;
    pending_.clear();
  }
  // kHeld: the calls are read when the answer ends.
}

void ToolCallParser::finish(std::string& content, std::vector<ToolCall>& calls) {
  if (format_ == ToolCallFormat::kHermes) {
    if (state_ == State::kInCall) {
      // The answer ended inside a call (max_tokens): a call if what was written is whole.
      if (std::optional<ToolCall> call = call_of(pending_)) {
        add_call(std::move(*call), calls);
      } else {
        emit_text(std::string(kCallOpen) + pending_, content);
      }
    } else {
      emit_text(pending_, content);
    }
  } else if (format_ == ToolCallFormat::kMistral) {
    feed_mistral(content, calls, true);
  } else if (state_ == State::kHeld) {
    std::optional<std::vector<ToolCall>> found =
        format_ == ToolCallFormat::kPythonic         ? pythonic_tool_calls(pending_)
        : format_ == ToolCallFormat::kNamedArguments ? named_arguments_call(pending_, function_)
        : format_ == ToolCallFormat::kCallList       ? call_list(pending_)
                                                     : llama3_calls(pending_);
    if (found) {
      for (ToolCall& call : *found) add_call(std::move(call), calls);
    } else {
      content += pending_;
    }
  } else {
    content += pending_;
  }
  pending_.clear();
  whitespace_.clear();
  after_call_ = false;
  call_scanned_ = 0;
  state_ = initial_state();
}

}  // namespace headway::serving::http
