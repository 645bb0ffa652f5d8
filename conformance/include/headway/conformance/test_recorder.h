// Helper for writing tests: collects the first few violations of a rule while a test runs many
// cases, and turns them into a TestResult.
//
// Threading: one thread.
#pragma once

#include <headway/conformance/result.h>

#include <chrono>
#include <string>

namespace headway::conformance {

class TestRecorder {
 public:
  TestRecorder(std::string id, std::string title);

  // Records one violation; the message of the first one is kept (and a count of the others).
  void fail(const std::string& message);
  void skip(const std::string& reason);
  void not_supported(const std::string& reason);
  void warn(const std::string& message);
  void note(const std::string& message);  // shown on PASS
  // The test checks a feature the plugin declares: its FAIL breaks conformance.
  void for_declared_feature() { result_.declared_feature = true; }
  bool failed() const { return failures_ > 0; }
  nlohmann::json& metrics() { return result_.metrics; }

  TestResult finish();

 private:
  TestResult result_;
  std::chrono::steady_clock::time_point start_;
  uint64_t failures_ = 0;
  std::string first_failure_;
  std::string note_;
};

}  // namespace headway::conformance
