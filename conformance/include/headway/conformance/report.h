// Writing a suite run: the JSON report (nlohmann_json) and JUnit XML for CI tools.
//
// Threading: plain functions.
#pragma once

#include <headway/conformance/result.h>
#include <headway/core/plugin_registry.h>

#include <filesystem>
#include <string>

namespace headway::conformance {

struct MachineInfo {
  std::string system;  // uname: sysname release machine
  std::string node;
  unsigned cpus = 0;
};
MachineInfo machine_info();

struct RunInfo {
  std::string plugin_path;
  std::string plugin_name;
  std::string plugin_short_name;
  std::string plugin_version;
  std::string plugin_kind;
  std::string plugin_abi;  // "1.0"
  std::string host_version;
  std::string host_abi;
  std::string options;
  uint64_t seed = 0;
  MachineInfo machine;
};

nlohmann::json report_json(const RunInfo& run, const ProfileResult& result);
std::string junit_xml(const RunInfo& run, const ProfileResult& result);
// Writes text to a file; throws core::Error naming the file when it cannot.
void write_file(const std::filesystem::path& path, const std::string& text);

}  // namespace headway::conformance
