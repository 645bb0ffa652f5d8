#include <fmt/format.h>
#include <headway/conformance/child_process.h>
#include <headway/conformance/isolated_run.h>
#include <headway/core/error.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string_view>

namespace headway::conformance {
namespace {

Outcome outcome_of(std::string_view name) {
  for (const Outcome o : {Outcome::kPass, Outcome::kFail, Outcome::kSkip, Outcome::kNotSupported,
                          Outcome::kQualityWarning}) {
    if (outcome_name(o) == name) return o;
  }
  throw core::Error(fmt::format("conformance: unknown test outcome '{}'", name));
}

}  // namespace

nlohmann::json profile_result_to_json(const ProfileResult& result) {
  nlohmann::json tests = nlohmann::json::array();
  for (const TestResult& t : result.tests) {
    tests.push_back({{"id", t.id},
                     {"title", t.title},
                     {"outcome", outcome_name(t.outcome)},
                     {"message", t.message},
                     {"seconds", t.seconds},
                     {"metrics", t.metrics},
                     {"core", t.core},
                     {"declared_feature", t.declared_feature}});
  }
  return {{"profile", result.profile},
          {"mustpass", result.mustpass},
          {"tests", std::move(tests)},
          {"seconds", result.seconds},
          {"missing_core", result.missing_core}};
}

ProfileResult profile_result_from_json(const nlohmann::json& json) {
  ProfileResult result;
  result.profile = json.at("profile").get<std::string>();
  result.mustpass = json.at("mustpass").get<std::string>();
  for (const nlohmann::json& t : json.at("tests")) {
    TestResult& test = result.tests.emplace_back();
    test.id = t.at("id").get<std::string>();
    test.title = t.at("title").get<std::string>();
    test.outcome = outcome_of(t.at("outcome").get<std::string>());
    test.message = t.at("message").get<std::string>();
    test.seconds = t.at("seconds").get<double>();
    test.metrics = t.at("metrics");
    test.core = t.at("core").get<bool>();
    test.declared_feature = t.at("declared_feature").get<bool>();
  }
  result.missing_core = json.at("missing_core").get<std::vector<std::string>>();
  result.seconds = json.at("seconds").get<double>();
  return result;
}

ProfileResult run_profile_isolated(const SuiteContext& context, const std::string& profile,
                                   double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  int fds[2];
  if (::pipe(fds) != 0) {
    throw core::Error(fmt::format("conformance: pipe: {}", std::strerror(errno)));
  }
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw core::Error(fmt::format("conformance: fork: {}", std::strerror(errno)));
  }
  if (child == 0) {
    ::close(fds[0]);
    int code = 0;
    try {
      const ProfileResult result = run_profile(context, profile);
      // Replace, not throw on, bytes that are not UTF-8: a plugin's text must not cost the report.
      constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
      code =
          write_all(fds[1], profile_result_to_json(result).dump(-1, ' ', false, kReplace)) ? 0 : 3;
    } catch (const std::exception& e) {
      // The parent reports it as it would have in one process.
      write_all(fds[1], nlohmann::json{{"error", e.what()}}.dump(
                            -1, ' ', false, nlohmann::json::error_handler_t::replace));
      code = 4;
    }
    ::close(fds[1]);
    // No exit handlers or static destructors: they belong to the parent, which runs them once.
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string text;
  const bool finished = read_all(fds[0], timeout_s, text);
  ::close(fds[0]);
  if (!finished) ::kill(child, SIGKILL);  // a plugin that hangs: the verdict must still come
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !json.is_discarded()) {
    return profile_result_from_json(json);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 4 && !json.is_discarded() &&
      json.contains("error")) {
    throw core::Error(json["error"].get<std::string>());
  }
  // Where to look for the crash's place: this build's own sanitizer report, when it has one (the
  // child's standard error is the suite's), rather than advice to rebuild with what it has.
#if defined(__SANITIZE_ADDRESS__)
  // A plugin that called exit() leaves no report: said as a condition.
  constexpr const char* kWhere =
      "this build has AddressSanitizer: where it found the fault, its report is on standard error "
      "above; otherwise run the profile under gdb";
#else
  constexpr const char* kWhere =
      "run the profile under gdb, or a build with AddressSanitizer, to see where";
#endif
  ProfileResult crashed;
  crashed.profile = profile;
  crashed.mustpass = mustpass_for(context.options, profile);
  crashed.missing_core = mustpass_tests(crashed.mustpass);
  crashed.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  TestResult& t = crashed.tests.emplace_back();
  t.seconds = crashed.seconds;
  t.id = "suite.completed";
  t.title = "the suite runs to its end with the plugin loaded";
  t.outcome = Outcome::kFail;
  t.message = finished
                  ? fmt::format(
                        "the process running the {} profile {} before it finished: the plugin "
                        "crashed or ended it, so no test result is available ({})",
                        profile, ending_of(status), kWhere)
                  : fmt::format(
                        "the {} profile was still running after {:g} s (--timeout) and was killed: "
                        "the plugin hangs, or is far slower than the suite expects; no test result "
                        "is available",
                        profile, timeout_s);
  return crashed;
}

}  // namespace headway::conformance
