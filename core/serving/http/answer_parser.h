// What a chat answer's text becomes for the client when the server parses it: the reasoning
// (ReasoningParser), then, in what is left, the tool calls (ToolCallParser) and the content. As in
// vLLM, calls are looked for only after the thinking: a call the model considers while it reasons
// is not made.
//
// Threading: one thread at a time (one parser per choice); copies are independent.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reasoning_parser.h"
#include "tool_call_parser.h"

namespace headway::serving::http {

// What a piece of the answer (or all of it) gave; feed() and finish() append.
struct AnswerPieces {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
  void clear() {
    reasoning.clear();
    content.clear();
    calls.clear();
  }
};

class AnswerParser {
 public:
  // Either may be absent (then that part is not looked for). `keep_reasoning` false (vLLM's
  // include_reasoning = false): the reasoning is split off and dropped.
  AnswerParser(std::optional<ReasoningParser> reasoning, std::optional<ToolCallParser> tools,
               bool keep_reasoning = true)
      : reasoning_(std::move(reasoning)),
        tools_(std::move(tools)),
        keep_reasoning_(keep_reasoning) {}

  // Where the choice's prompt left the thinking (ReasoningParser::follow_prompt()); call before
  // the first feed().
  void follow_prompt(PromptReasoning where) {
    if (reasoning_) reasoning_->follow_prompt(where);
  }
  void feed(std::string_view text, AnswerPieces& out);
  void finish(AnswerPieces& out);

  // Whether the answer carries a reasoning field (null when it had none).
  bool gives_reasoning() const { return reasoning_.has_value() && keep_reasoning_; }
  // Whether any call was found so far (finish_reason "tool_calls").
  bool called_tools() const { return tools_ && tools_->called(); }

 private:
  // `content` of the reasoning parser: the tool call parser's input.
  void take_content(std::string_view content, AnswerPieces& out);

  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tools_;
  bool keep_reasoning_;
  std::string after_reasoning_;  // reused between calls
  std::string dropped_;          // the reasoning when it is not kept
};

}  // namespace headway::serving::http
