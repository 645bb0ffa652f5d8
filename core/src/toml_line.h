// " (line N)" after a key in an error about a TOML file, so that every file Headway reads points to
// the line the same way (deployments, plugin options, workloads); "" for a node without a source
// position (one built or copied in code, not parsed).
// Threading: a pure function.
#pragma once

#include <fmt/format.h>
#include <toml++/toml.h>

#include <string>

namespace headway::core {

inline std::string line_of(const toml::node& node) {
  const auto& begin = node.source().begin;
  return begin.line > 0 ? fmt::format(" (line {})", begin.line) : std::string();
}

}  // namespace headway::core
