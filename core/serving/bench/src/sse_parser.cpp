#include "headway/serving/bench/sse_parser.h"

namespace headway::serving::bench {

void SseParser::feed(std::string_view bytes, std::vector<SseEvent>& out) {
  for (char c : bytes) {
    if (c == '\n' && after_cr_) {
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      end_line(out);
    } else {
      line_.push_back(c);
    }
  }
}

bool SseParser::has_partial_event() const {
  return !line_.empty() || has_data_ || !current_.event.empty();
}

void SseParser::end_line(std::vector<SseEvent>& out) {
  if (line_.empty()) {
    if (has_data_) out.push_back(std::move(current_));
    current_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (line_.front() == ':') {  // a comment, e.g. a keep-alive
    line_.clear();
    return;
  }
  const size_t colon = line_.find(':');
  const std::string_view line(line_);
  const std::string_view field = line.substr(0, colon);
  std::string_view value =
      colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) current_.data.push_back('\n');
    current_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    current_.event.assign(value);
  }  // "id" and "retry" do not matter to a benchmark client
  line_.clear();
}

}  // namespace headway::serving::bench
