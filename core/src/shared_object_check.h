// A look at a file before dlopen sees it. dlopen maps a shared object's segments as the file's
// program headers say; when the file is shorter than that (a plugin half-copied into a plugin
// directory), the loader touches pages past the end and the whole process dies with SIGBUS,
// before any error can be reported. Reading the headers first turns that into an error that
// names the file and what is wrong.
//
// Threading: any thread; reads the file, changes nothing.
#pragma once

#include <filesystem>
#include <string>

namespace headway::core {

// Why `path` cannot be a shared object this process could load: not readable, not ELF, another
// word size, byte order or machine, not a shared object, or shorter than its headers say
// (truncated). Empty when nothing is wrong that the headers show.
std::string shared_object_problem(const std::filesystem::path& path);

}  // namespace headway::core
