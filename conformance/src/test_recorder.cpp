#include <headway/conformance/test_recorder.h>

#include <utility>

namespace headway::conformance {

TestRecorder::TestRecorder(std::string id, std::string title)
    : start_(std::chrono::steady_clock::now()) {
  result_.id = std::move(id);
  result_.title = std::move(title);
}

void TestRecorder::fail(const std::string& message) {
  if (failures_++ == 0) first_failure_ = message;
}

void TestRecorder::skip(const std::string& reason) {
  result_.outcome = Outcome::kSkip;
  result_.message = reason;
}

void TestRecorder::not_supported(const std::string& reason) {
  result_.outcome = Outcome::kNotSupported;
  result_.message = reason;
}

void TestRecorder::warn(const std::string& message) {
  if (result_.outcome == Outcome::kPass) result_.outcome = Outcome::kQualityWarning;
  note_ = message;
}

void TestRecorder::note(const std::string& message) { note_ = message; }

TestResult TestRecorder::finish() {
  result_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (failures_ > 0) {
    // A failure outranks a skip or a warning recorded earlier in the same test.
    result_.outcome = Outcome::kFail;
    result_.message = first_failure_;
    if (failures_ > 1) result_.message += " (and " + std::to_string(failures_ - 1) + " more)";
    result_.metrics["violations"] = failures_;
  } else if (result_.outcome == Outcome::kPass || result_.outcome == Outcome::kQualityWarning) {
    result_.message = note_;
  }
  return result_;
}

}  // namespace headway::conformance
