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

// What a cgroup with `limit` and `usage` can still take, `reclaimable` of its usage counted as
// free.
uint64_t headroom(uint64_t limit, uint64_t usage, uint64_t reclaimable) {
  const uint64_t used = usage > reclaimable ? usage - reclaimable : 0;
  return limit > used ? limit - used : 0;
}

void take_lower(std::optional<HostMemory>& memory, uint64_t bytes, const fs::path& where) {
  if (bytes < memory->available_bytes) {
    memory = HostMemory{bytes, "the memory limit of cgroup " + where.string() + ", less its use"};
  }
}

// The directories from the process's cgroup (`path`, as /proc/self/cgroup gives it) up to the
// mount, where each level may limit it. A path that leaves the mount ("/../x": the process is
// outside its cgroup namespace's root) gives the mount alone.
std::vector<fs::path> levels(const fs::path& mount, const std::string& path) {
  const fs::path relative = fs::path(path).relative_path().lexically_normal();
  std::vector<fs::path> dirs;
  fs::path dir = mount;
  dirs.push_back(dir);
  if (!relative.empty() && *relative.begin() != "..") {
    for (const fs::path& part : relative) {
      if (part.empty() || part == ".") continue;
      dir /= part;
      dirs.push_back(dir);
    }
  }
  return dirs;
}

// A level's limit, less its use: v2 (memory.max, memory.current) or v1 (memory.limit_in_bytes,
// memory.usage_in_bytes, memory.stat's total_* counters).
void apply_level(std::optional<HostMemory>& memory, const fs::path& dir, bool v2) {
  const fs::path limit_file = dir / (v2 ? "memory.max" : "memory.limit_in_bytes");
  const std::optional<uint64_t> limit = number_in(limit_file);  // v2's "max": none
  if (!limit || *limit >= kUnlimited) return;
  const fs::path stat = dir / "memory.stat";
  // What the kernel can take back: file pages, and on v2 the reclaimable kernel slab (dentries,
  // inodes) that memory.current holds too; MemAvailable counts both as free.
  const uint64_t reclaimable =
      field_of(stat, v2 ? "active_file" : "total_active_file").value_or(0) +
      field_of(stat, v2 ? "inactive_file" : "total_inactive_file").value_or(0) +
      (v2 ? field_of(stat, "slab_reclaimable").value_or(0) : 0);
  const uint64_t usage =
      number_in(dir / (v2 ? "memory.current" : "memory.usage_in_bytes")).value_or(0);
  take_lower(memory, headroom(*limit, usage, reclaimable), limit_file);
}

}  // namespace

std::optional<HostMemory> host_memory(const fs::path& root) {
  const std::optional<uint64_t> kib = field_of(root / "proc/meminfo", "MemAvailable:");
  if (!kib) return std::nullopt;
  std::optional<HostMemory> memory = HostMemory{*kib * 1024, "MemAvailable in /proc/meminfo"};
  // /proc/self/cgroup: "0::/path" (v2), "4:memory:/path" (v1; controllers may be listed
  // together). Every level from the mount down to the process's cgroup may limit it; a level not
  // visible here (a container sees its own cgroup as the mount) is skipped, unreadable files too.
  std::ifstream cgroups(root / "proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    bool v1_memory = false;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      v1_memory = v1_memory || name == "memory";
    const bool v2 = line.compare(0, first, "0") == 0 && controllers.empty();
    if (!v2 && !v1_memory) continue;
    const fs::path mount = root / (v2 ? "sys/fs/cgroup" : "sys/fs/cgroup/memory");
    for (const fs::path& dir : levels(mount, path)) apply_level(memory, dir, v2);
  }
  return memory;
}

}  // namespace headway::models::cpu
