#include "answer_parser.h"

namespace headway::serving::http {

void AnswerParser::take_content(std::string_view content, AnswerPieces& out) {
  if (tools_) {
    tools_->feed(content, out.content, out.calls);
  } else {
    out.content += content;
  }
}

void AnswerParser::feed(std::string_view text, AnswerPieces& out) {
  if (!reasoning_) {
    take_content(text, out);
    return;
  }
  after_reasoning_.clear();
  dropped_.clear();
  reasoning_->feed(text, keep_reasoning_ ? out.reasoning : dropped_, after_reasoning_);
  take_content(after_reasoning_, out);
}

void AnswerParser::finish(AnswerPieces& out) {
  if (reasoning_) {
    after_reasoning_.clear();
    dropped_.clear();
    reasoning_->finish(keep_reasoning_ ? out.reasoning : dropped_, after_reasoning_);
    take_content(after_reasoning_, out);
  }
  if (tools_) tools_->finish(out.content, out.calls);
}

}  // namespace headway::serving::http
