// An incremental parser for server-sent events (the WHATWG "text/event-stream" format) as an
// OpenAI-compatible server streams completions: bytes arrive in arbitrary pieces, split anywhere,
// and complete events come out. Lines end in "\n", "\r\n" or "\r"; "data:" lines of one event are
// joined with "\n"; ":" lines are comments (keep-alives); a blank line ends the event. An event
// without data is dropped, as the format says.
//
// Ownership: plain value. Threading: one stream per parser, used by one thread at a time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace headway::serving::bench {

struct SseEvent {
  std::string event;  // the "event:" field; empty means the default "message"
  std::string data;   // "data:" lines joined with "\n"
};

class SseParser {
 public:
  // Parses `bytes` and appends every event they complete to `out`.
  void feed(std::string_view bytes, std::vector<SseEvent>& out);

  // True when bytes of an unfinished event are buffered (a stream that ends here was cut).
  bool has_partial_event() const;

 private:
  void end_line(std::vector<SseEvent>& out);

  std::string line_;
  SseEvent current_;
  bool has_data_ = false;
  bool after_cr_ = false;  // the previous byte was "\r": a following "\n" belongs to it
};

}  // namespace headway::serving::bench
