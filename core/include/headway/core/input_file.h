// Reading input files (a deployment, a workload, a trace, an API key, a checkpoint's JSON files)
// with errors that name the file and say why it cannot be read: "no such file", "a directory, not
// a file", or the system's reason.
// Stateless; thread-safe.
#pragma once

#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace headway::core {

// `open_errno`: errno saved right after the failed open, if there was one (0: none), for a file
// that exists but could not be opened (no permission).
std::string unreadable_reason(const std::filesystem::path& path, int open_errno = 0);

// Whether `file` exists and is not a regular file (a directory, a FIFO, a device): a reader checks
// before opening, since opening a FIFO blocks until a writer comes and /dev/zero never ends.
bool exists_but_not_regular(const std::filesystem::path& file);

// The API key in `file` (`serve` and `bench --api-key-file`): its first line, without the spaces
// and tabs around it. Throws Error naming the flag and the file when it cannot be read (with
// unreadable_reason()) or holds no key.
std::string read_api_key_file(const std::filesystem::path& file);

// The whole of `file` as bytes. Throws Error "<file>: cannot open: <reason>" when it cannot be
// read (a missing file, a directory, anything else but a regular file, such as a FIFO that would
// block, no permission).
std::string read_text_file(const std::filesystem::path& file);

// `file` parsed as JSON (a checkpoint's tokenizer.json, config.json, generation_config.json,
// tokenizer_config.json). Throws Error naming the file: "cannot open: <reason>" as
// read_text_file(), or "invalid JSON: <parser's message>" with the byte where parsing stopped (or
// the nesting past sdk::kMaxFileJsonDepth, refused before parsing).
nlohmann::json read_json_file(const std::filesystem::path& file);

}  // namespace headway::core
