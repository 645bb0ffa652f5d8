// Writing a command's output file (a report, a cost file) so that a failure is never silent and
// never costs the previous file: the text goes to a temporary file beside it, which replaces the
// target only once it is complete. Stateless; thread-safe for distinct paths.
#pragma once

#include <filesystem>
#include <string_view>

namespace headway::core {

// Writes `text` to `file`. A regular file (or none yet) is replaced atomically by a rename (a
// symbolic link's target, not the link); a device or pipe (/dev/stdout, a FIFO) is written in
// place. Throws Error naming the file, `what`
// it is ("the report") and the reason when anything fails, and leaves an existing file as it was.
void write_output_file(const std::filesystem::path& file, std::string_view text,
                       std::string_view what);

}  // namespace headway::core
