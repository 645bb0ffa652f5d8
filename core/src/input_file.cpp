#include "headway/core/input_file.h"

#include <cstring>
#include <system_error>

namespace headway::core {

std::string unreadable_reason(const std::filesystem::path& path, int open_errno) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) return "no such file";
  if (error) return error.message();  // e.g. a folder on the way that may not be read
  if (std::filesystem::is_directory(status)) return "a directory, not a file";
  if (!std::filesystem::is_regular_file(status)) return "not a regular file";
  return open_errno != 0 ? std::strerror(open_errno) : "cannot be read";
}

}  // namespace headway::core
