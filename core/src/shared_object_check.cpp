#include "shared_object_check.h"

#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

namespace headway::core {
namespace {

// The ELF machine this process runs on: a plugin built for another cannot load.
constexpr uint16_t kOwnMachine =
#if defined(__x86_64__)
    EM_X86_64;
#elif defined(__aarch64__)
    EM_AARCH64;
#else
    EM_NONE;  // unknown here: not checked
#endif

// "needs N bytes, the file has M": the wording of every truncation.
std::string truncated(const char* what, uint64_t needed, uint64_t size) {
  return fmt::format("truncated: its {} end at byte {}, but the file has {} bytes", what, needed,
                     size);
}

}  // namespace

std::string shared_object_problem(const std::filesystem::path& path) {
  std::error_code error;
  // A directory, a device or a FIFO: "cannot read its size: Operation not supported" said less.
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!error && std::filesystem::is_directory(status)) return "a directory, not a file";
  if (!error && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    return "not a regular file (a device, FIFO or socket)";
  }
  const uint64_t size = std::filesystem::file_size(path, error);
  if (error) return "cannot read its size: " + error.message();
  std::ifstream file(path, std::ios::binary);
  if (!file) return "cannot be opened for reading";

  Elf64_Ehdr header{};
  const uint64_t header_bytes = std::min<uint64_t>(size, sizeof header);
  file.read(reinterpret_cast<char*>(&header), static_cast<std::streamsize>(header_bytes));
  if (static_cast<uint64_t>(file.gcount()) != header_bytes) return "cannot be read";
  if (header_bytes < SELFMAG || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return "not an ELF file";
  }
  if (header_bytes < sizeof header) return truncated("ELF header", sizeof header, size);
  if (header.e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF file";
  if (header.e_ident[EI_DATA] != ELFDATA2LSB) return "not a little-endian ELF file";
  if (header.e_type != ET_DYN) return "an ELF file, but not a shared object";
  if (kOwnMachine != EM_NONE && header.e_machine != kOwnMachine) {
    return fmt::format("built for another machine (ELF machine {}, this one is {})",
                       header.e_machine, kOwnMachine);
  }
  // The section headers sit at the end of a linked file: where a truncation shows first.
  const uint64_t sections_end = header.e_shoff + uint64_t{header.e_shnum} * header.e_shentsize;
  if (header.e_shoff != 0 && sections_end > size) {
    return truncated("section headers", sections_end, size);
  }
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0) {
    return "an ELF shared object without valid program headers";
  }
  const uint64_t programs_end = header.e_phoff + uint64_t{header.e_phnum} * sizeof(Elf64_Phdr);
  if (programs_end > size) return truncated("program headers", programs_end, size);

  std::vector<Elf64_Phdr> programs(header.e_phnum);
  file.seekg(static_cast<std::streamoff>(header.e_phoff));
  if (!file.read(reinterpret_cast<char*>(programs.data()),
                 static_cast<std::streamsize>(programs.size() * sizeof(Elf64_Phdr)))) {
    return "its program headers cannot be read";
  }
  for (const Elf64_Phdr& program : programs) {
    if (program.p_type != PT_LOAD) continue;
    const uint64_t end = program.p_offset + program.p_filesz;
    if (end < program.p_offset || end > size) return truncated("loadable segments", end, size);
  }
  return {};
}

}  // namespace headway::core
