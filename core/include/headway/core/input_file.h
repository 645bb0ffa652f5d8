// Reading input files (a deployment, a workload, a trace, an API key) with errors that say why one
// cannot be read, for the one-line error that
// names it: "no such file", "a directory, not a file", or the system's reason.
// Stateless; thread-safe.
#pragma once

#include <filesystem>
#include <string>

namespace headway::core {

// `open_errno`: errno saved right after the failed open, if there was one (0: none), for a file
// that exists but could not be opened (no permission).
std::string unreadable_reason(const std::filesystem::path& path, int open_errno = 0);

// The API key in `file` (`serve` and `bench --api-key-file`): its first line, without the spaces
// and tabs around it. Throws Error naming the flag and the file when it cannot be read (with
// unreadable_reason()) or holds no key.
std::string read_api_key_file(const std::filesystem::path& file);

}  // namespace headway::core
