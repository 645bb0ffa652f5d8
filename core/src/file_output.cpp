#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/file_output.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace headway::core {
namespace {

// Writes all of `text` to `path` (opened with `mode`); false with errno set on any failure,
// including one the C library only reports when the file is closed.
bool write_all(const std::filesystem::path& path, const char* mode, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (f == nullptr) return false;
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size() &&
                       std::fflush(f) == 0 && std::ferror(f) == 0;
  const int saved = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written) errno = saved;
  return written && closed;
}

}  // namespace

void write_output_file(const std::filesystem::path& path, std::string_view text,
                       std::string_view what) {
  std::error_code ec;
  // Through a symbolic link to its target: the rename below would replace the link itself.
  const std::filesystem::path file =
      std::filesystem::is_symlink(path, ec) ? std::filesystem::weakly_canonical(path, ec) : path;
  const auto status = std::filesystem::status(file, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    // A device or a pipe: there is nothing to replace, and a file beside it (in /dev) must not be.
    if (!write_all(file, "w", text)) {
      throw Error(
          fmt::format("{}: writing {} failed: {}", file.string(), what, std::strerror(errno)));
    }
    return;
  }
  std::filesystem::path partial = file;
  partial += fmt::format(".partial-{}", ::getpid());
  if (!write_all(partial, "wb", text)) {
    const int saved = errno;
    std::filesystem::remove(partial, ec);
    throw Error(
        fmt::format("{}: writing {} failed: {}", file.string(), what, std::strerror(saved)));
  }
  std::filesystem::rename(partial, file, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw Error(fmt::format("{}: writing {} failed: {}", file.string(), what, ec.message()));
  }
}

}  // namespace headway::core
