// What one conformance test concludes, and the verdict of a whole profile.
//
// Outcomes: PASS; FAIL (the plugin broke a rule); SKIP (the suite could not run the test here, e.g.
// the reference model is not installed); NOT_SUPPORTED (an optional feature the plugin does not
// declare); QUALITY_WARNING (the rule holds but a measured quality, e.g. bandwidth, is below its
// floor; it does not break conformance).
//
// Threading: plain values.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace headway::conformance {

enum class Outcome { kPass, kFail, kSkip, kNotSupported, kQualityWarning };

std::string_view outcome_name(Outcome outcome);  // "PASS", "FAIL", …

struct TestResult {
  std::string id;     // "scheduler.plans_valid"
  std::string title;  // one line: what the test checks
  Outcome outcome = Outcome::kPass;
  std::string message;  // why it failed, was skipped, or what was measured
  double seconds = 0.0;
  nlohmann::json metrics = nlohmann::json::object();  // measured values, e.g. {"steps": 12345}
  bool core = false;                                  // listed in the profile's mustpass file
  // Tests an optional feature the plugin declares (--features): it counts toward conformance like
  // a core test, since the plugin claims the behaviour.
  bool declared_feature = false;
};

struct ProfileResult {
  std::string profile;   // "step-scheduler-core"
  std::string mustpass;  // "step-scheduler-core-v1"
  std::vector<TestResult> tests;
  // The whole profile's wall time. Tests judged from one shared pass (the scheduler's traces, a
  // router's routes) each report that pass's time, so the tests' times add up to more than this.
  double seconds = 0.0;

  // Conformant when every mustpass test ran and each is PASS, QUALITY_WARNING or NOT_SUPPORTED (the
  // plugin does not declare what the test needs), and no test of a declared feature FAILed.
  bool conformant() const;
  std::vector<std::string> missing_core;  // mustpass ids the profile did not produce
  // "step-scheduler-core: core 8/8 passed, extended 1 passed 0 failed 1 skipped 0 not supported
  // 0 warnings: CONFORMANT"
  std::string summary_line() const;
};

}  // namespace headway::conformance
