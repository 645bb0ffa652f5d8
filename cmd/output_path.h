// Checks a file a command will write at its end (a report, a plot, a cost file) before the work
// starts: a simulation, a benchmark or a profile can take minutes, and a typo in the path should
// not cost them. The write itself still reports its own failure.
// Threading: main thread; looks at the file system only.
#pragma once

#include <fmt/format.h>
#include <headway/core/error.h>
#include <unistd.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace headway::cmd {

// Throws core::Error naming `flag` and `path` when the file cannot be written: its directory is
// missing or not writable, or the path is a directory. `extension` (".png"), when given, is the
// only one the command writes.
inline void check_output_path(const std::string& path, std::string_view flag,
                              std::string_view extension = {}) {
  namespace fs = std::filesystem;
  const fs::path file(path);
  if (path == "-") {
    // Not standard output: the command's own text goes there, and the two would interleave.
    throw core::Error(fmt::format(
        "{} -: writes a file, not standard output (the command prints its own text there); give "
        "a file name",
        flag));
  }
  if (!extension.empty() && file.extension() != extension) {
    throw core::Error(fmt::format("{} {}: writes a {} file; give a name ending in {}", flag, path,
                                  extension.substr(1), extension));
  }
  std::error_code error;
  if (fs::is_directory(file, error)) {
    throw core::Error(fmt::format("{} {}: is a directory; give a file name", flag, path));
  }
  const fs::path directory = file.has_parent_path() ? file.parent_path() : fs::path(".");
  if (!fs::is_directory(directory, error)) {
    throw core::Error(
        fmt::format("{} {}: the directory {} does not exist", flag, path, directory.string()));
  }
  if (::access(directory.c_str(), W_OK) != 0) {
    throw core::Error(
        fmt::format("{} {}: the directory {} is not writable", flag, path, directory.string()));
  }
}

// Whether `a` and `b` name one file: the same existing file, or the same path once resolved.
inline bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) return fs::equivalent(a, b, error);
  return fs::weakly_canonical(a, error) == fs::weakly_canonical(b, error);
}

// Throws core::Error naming both flags when the output `path` (of `flag`) is one of `others`:
// an input it would overwrite, or another output of the same command. Empty paths are not given.
inline void check_distinct(
    const std::string& path, std::string_view flag,
    std::initializer_list<std::pair<std::string_view, const std::string*>> others) {
  if (path.empty()) return;
  for (const auto& [other_flag, other] : others) {
    if (other->empty() || !same_file(path, *other)) continue;
    throw core::Error(
        fmt::format("{} {}: is also {}; give {} a file of its own", flag, path, other_flag, flag));
  }
}

}  // namespace headway::cmd
