// Why an input file (a deployment, a workload, a trace) cannot be read, for the one-line error that
// names it: "no such file", "a directory, not a file", or the system's reason.
// Stateless; thread-safe.
#pragma once

#include <filesystem>
#include <string>

namespace headway::core {

// `open_errno`: errno saved right after the failed open, if there was one (0: none), for a file
// that exists but could not be opened (no permission).
std::string unreadable_reason(const std::filesystem::path& path, int open_errno = 0);

}  // namespace headway::core
