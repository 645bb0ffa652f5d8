// The process's log (spdlog's default logger) captured while a CapturedLog lives, for tests that
// assert what was logged; the logger before it comes back when it ends.
//
// Ownership: a value in the test's scope. Threading: any thread may log meanwhile; read text()
// once they have stopped (after the service or engine that logs is gone).
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace headway::test {

class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::string text() const { return text_.str(); }
  void clear() { text_.str(""); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace headway::test
