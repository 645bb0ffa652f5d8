#include "host_memory.h"

#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace headway::models::cpu {
namespace {

namespace fs = std::filesystem;

// Limits at or past this are "none" (v1 writes 2^63 rounded down to a page).
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

// The first whitespace-separated word of `file` as a number; nullopt if absent, "max" or not a
// number.
std::optional<uint64_t> number_in(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text)) return std::nullopt;
  try {
    size_t used = 0;
    const uint64_t value = std::stoull(text, &used);
    if (used != text.size()) return std::nullopt;
    return value;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The value of `key` in a "key value" file (memory.stat, meminfo with its "kB" after).
std::optional<uint64_t> field_of(const fs::path& file, std::string_view key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    uint64_t value = 0;
    if (fields >> name >> value && name == key) return value;
  }
  return std::nullopt;
}

// What a cgroup with `limit` and `usage` can still take, counting its inactive page cache as free.
uint64_t headroom(uint64_t limit, uint64_t usage, uint64_t inactive) {
  const uint64_t used = usage > inactive ? usage - inactive : 0;
  return limit > used ? limit - used : 0;
}

void take_lower(std::optional<HostMemory>& memory, uint64_t bytes, const fs::path& where) {
  if (bytes < memory->available_bytes) {
    memory = HostMemory{bytes, "the memory limit of cgroup " + where.string() + ", less its use"};
  }
}

// cgroup v2: every level from the process's cgroup up to the root may limit it.
void apply_v2(std::optional<HostMemory>& memory, const fs::path& mount, const std::string& path) {
  fs::path dir = (mount / fs::path(path).relative_path()).lexically_normal();
  while (true) {
    const std::optional<uint64_t> limit = number_in(dir / "memory.max");  // "max": none
    if (limit && *limit < kUnlimited) {
      take_lower(memory,
                 headroom(*limit, number_in(dir / "memory.current").value_or(0),
                          field_of(dir / "memory.stat", "inactive_file").value_or(0)),
                 dir / "memory.max");
    }
    if (dir == mount || !dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
    if (dir.native().size() < mount.native().size()) break;
  }
}

// cgroup v1: hierarchical_memory_limit is already the least limit of the cgroup and its
// ancestors. The process's own directory if it is visible, else the mount's root (a container
// sees its own cgroup there).
void apply_v1(std::optional<HostMemory>& memory, const fs::path& mount, const std::string& path) {
  for (const fs::path& dir : {(mount / fs::path(path).relative_path()).lexically_normal(), mount}) {
    if (!fs::exists(dir / "memory.stat")) continue;
    const std::optional<uint64_t> limit =
        field_of(dir / "memory.stat", "hierarchical_memory_limit");
    if (limit && *limit < kUnlimited) {
      take_lower(memory,
                 headroom(*limit, number_in(dir / "memory.usage_in_bytes").value_or(0),
                          field_of(dir / "memory.stat", "total_inactive_file").value_or(0)),
                 dir / "memory.stat");
    }
    return;
  }
}

}  // namespace

std::optional<HostMemory> host_memory(const fs::path& root) {
  const std::optional<uint64_t> kib = field_of(root / "proc/meminfo", "MemAvailable:");
  if (!kib) return std::nullopt;
  std::optional<HostMemory> memory = HostMemory{*kib * 1024, "MemAvailable in /proc/meminfo"};
  // /proc/self/cgroup: "0::/path" (v2), "4:memory:/path" (v1; controllers may be listed together).
  std::ifstream cgroups(root / "proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      apply_v2(memory, root / "sys/fs/cgroup", path);
      continue;
    }
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) {
      if (name == "memory") apply_v1(memory, root / "sys/fs/cgroup/memory", path);
    }
  }
  return memory;
}

}  // namespace headway::models::cpu
