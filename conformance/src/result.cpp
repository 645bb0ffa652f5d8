#include <fmt/format.h>
#include <headway/conformance/result.h>

namespace headway::conformance {

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
      return "PASS";
    case Outcome::kFail:
      return "FAIL";
    case Outcome::kSkip:
      return "SKIP";
    case Outcome::kNotSupported:
      return "NOT_SUPPORTED";
    case Outcome::kQualityWarning:
      return "QUALITY_WARNING";
  }
  return "?";
}

bool ProfileResult::conformant() const {
  if (!missing_core.empty()) return false;
  for (const TestResult& t : tests) {
    if (t.declared_feature && t.outcome == Outcome::kFail) return false;
    // NOT_SUPPORTED on a core test: the plugin does not declare what the test needs (a model that
    // samples itself has no logits to compare); it does not count against conformance.
    if (t.core && t.outcome != Outcome::kPass && t.outcome != Outcome::kQualityWarning &&
        t.outcome != Outcome::kNotSupported) {
      return false;
    }
  }
  return true;
}

std::string ProfileResult::summary_line() const {
  size_t core_total = 0, core_passed = 0, core_unsupported = 0;
  size_t passed = 0, failed = 0, skipped = 0, unsupported = 0, warnings = 0, declared_failed = 0;
  for (const TestResult& t : tests) {
    declared_failed += t.declared_feature && t.outcome == Outcome::kFail;
    if (t.core) {
      ++core_total;
      core_passed += t.outcome == Outcome::kPass || t.outcome == Outcome::kQualityWarning;
      core_unsupported += t.outcome == Outcome::kNotSupported;
      warnings += t.outcome == Outcome::kQualityWarning;
      continue;
    }
    passed += t.outcome == Outcome::kPass;
    failed += t.outcome == Outcome::kFail;
    skipped += t.outcome == Outcome::kSkip;
    unsupported += t.outcome == Outcome::kNotSupported;
    warnings += t.outcome == Outcome::kQualityWarning;
  }
  // A core test NOT_SUPPORTED does not count against conformance (conformant()), but it did not
  // pass either: the line says how many there were.
  std::string notes;
  if (core_unsupported > 0) notes += fmt::format(", {} not supported", core_unsupported);
  if (!missing_core.empty()) notes += fmt::format(", {} missing", missing_core.size());
  return fmt::format(
      "{}: core {}/{} passed{}, extended {} passed {} failed{} {} skipped {} not supported, {} "
      "quality warnings: {}",
      profile, core_passed, core_total + missing_core.size(),
      notes.empty() ? "" : " (" + notes.substr(2) + ")", passed, failed,
      declared_failed > 0 ? fmt::format(" ({} of a declared feature)", declared_failed) : "",
      skipped, unsupported, warnings, conformant() ? "CONFORMANT" : "NOT CONFORMANT");
}

}  // namespace headway::conformance
