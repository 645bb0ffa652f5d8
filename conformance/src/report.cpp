// The JSON report and the JUnit XML (one <testsuite> per profile, one <testcase> per test; FAIL is
// a <failure>, SKIP and NOT_SUPPORTED are <skipped>, as Jenkins, GitLab and GitHub readers expect).
#include <fmt/format.h>
#include <headway/conformance/report.h>
#include <headway/core/error.h>
#include <sys/utsname.h>

#include <fstream>
#include <thread>

namespace headway::conformance {
namespace {

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters even escaped.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

}  // namespace

MachineInfo machine_info() {
  MachineInfo info;
  struct utsname u {};
  if (uname(&u) == 0) {
    info.system = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
    info.node = u.nodename;
  }
  info.cpus = std::thread::hardware_concurrency();
  return info;
}

nlohmann::json report_json(const RunInfo& run, const ProfileResult& result) {
  nlohmann::json tests = nlohmann::json::array();
  for (const TestResult& t : result.tests) {
    tests.push_back({{"id", t.id},
                     {"title", t.title},
                     {"core", t.core},
                     {"declared_feature", t.declared_feature},
                     {"result", outcome_name(t.outcome)},
                     {"message", t.message},
                     {"seconds", t.seconds},
                     {"metrics", t.metrics}});
  }
  return {
      {"plugin",
       {{"path", run.plugin_path},
        {"name", run.plugin_name},
        {"short_name", run.plugin_short_name},
        {"version", run.plugin_version},
        {"kind", run.plugin_kind},
        {"abi", run.plugin_abi},
        {"options", run.options}}},
      {"host", {{"version", run.host_version}, {"abi", run.host_abi}}},
      {"machine",
       {{"system", run.machine.system}, {"node", run.machine.node}, {"cpus", run.machine.cpus}}},
      {"seed", run.seed},
      {"profile", result.profile},
      {"mustpass", result.mustpass},
      {"missing_core_tests", result.missing_core},
      {"conformant", result.conformant()},
      {"summary", result.summary_line()},
      {"seconds", result.seconds},
      {"tests", tests}};
}

std::string junit_xml(const RunInfo& run, const ProfileResult& result) {
  size_t failures = result.missing_core.size(), skipped = 0;
  for (const TestResult& t : result.tests) {
    failures += t.outcome == Outcome::kFail;
    skipped += t.outcome == Outcome::kSkip || t.outcome == Outcome::kNotSupported;
  }
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  xml += fmt::format("<testsuites name=\"headway-conformance\" tests=\"{}\" failures=\"{}\">\n",
                     result.tests.size() + result.missing_core.size(), failures);
  xml += fmt::format(
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" "
      "time=\"{:.3f}\" hostname=\"{}\">\n",
      xml_escape(result.profile), result.tests.size() + result.missing_core.size(), failures,
      skipped, result.seconds, xml_escape(run.machine.node));
  xml += "    <properties>\n";
  const std::pair<const char*, std::string> properties[] = {
      {"plugin", run.plugin_name},
      {"plugin.version", run.plugin_version},
      {"plugin.abi", run.plugin_abi},
      {"plugin.path", run.plugin_path},
      {"host.version", run.host_version},
      {"machine", run.machine.system},
      {"cpus", std::to_string(run.machine.cpus)},
      {"seed", std::to_string(run.seed)},
      {"verdict", result.conformant() ? "conformant" : "not conformant"}};
  for (const auto& [name, value] : properties) {
    xml += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", name, xml_escape(value));
  }
  xml += "    </properties>\n";
  for (const TestResult& t : result.tests) {
    const std::string classname = result.profile + (t.core ? ".core" : ".extended");
    xml += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"",
                       xml_escape(classname), xml_escape(t.id), t.seconds);
    const std::string message = xml_escape(t.message);
    switch (t.outcome) {
      case Outcome::kFail:
        xml += fmt::format(">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                           message, message);
        break;
      case Outcome::kSkip:
      case Outcome::kNotSupported:
        xml += fmt::format(">\n      <skipped message=\"{}: {}\"/>\n    </testcase>\n",
                           outcome_name(t.outcome), message);
        break;
      case Outcome::kQualityWarning:
        xml += fmt::format(
            ">\n      <system-out>QUALITY_WARNING: {}</system-out>\n    </testcase>\n", message);
        break;
      case Outcome::kPass:
        xml += "/>\n";
        break;
    }
  }
  for (const std::string& id : result.missing_core) {
    xml += fmt::format(
        "    <testcase classname=\"{}.core\" name=\"{}\" time=\"0\">\n      <failure "
        "message=\"mustpass test did not run\"/>\n    </testcase>\n",
        xml_escape(result.profile), xml_escape(id));
  }
  xml += "  </testsuite>\n</testsuites>\n";
  return xml;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw core::Error("cannot write " + path.string());
}

}  // namespace headway::conformance
