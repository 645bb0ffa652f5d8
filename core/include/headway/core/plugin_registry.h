// Finds, loads and checks plugin shared libraries. The only user of Boost.DLL in Headway.
//
// Ownership: the registry owns every loaded library and never unloads one while the process runs,
// so descriptors, tables and option schemas it hands out stay valid for the life of the process.
// Threading: load/find are guarded by a mutex; LoadedPlugin values are immutable once returned.
#pragma once

#include <headway/abi.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace headway::core {

std::string_view kind_name(int32_t kind);  // "step scheduler", "router", …

struct LoadedPlugin {
  std::filesystem::path path;      // canonical (symlinks resolved)
  std::filesystem::path found_in;  // the search directory a scan first found it in; empty if none
  const hw_plugin_descriptor* descriptor = nullptr;

  std::string name() const;
  std::string short_name() const;
  std::string version() const;
  int32_t kind() const { return descriptor->kind; }
  template <class Table>
  const Table& table() const {
    return *static_cast<const Table*>(descriptor->table);
  }
};

class PluginRegistry {
 public:
  // Search order for names: directories added with add_search_directory (in order), then those of
  // HEADWAY_PLUGIN_PATH (colon-separated), then the default next to the executable
  // (<exe>/../lib/headway/plugins: the layout of both the build tree and an install).
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  void add_search_directory(const std::filesystem::path& directory);
  std::vector<std::filesystem::path> search_directories() const;

  // Loads one library and checks its descriptor. Throws Error naming the file, the plugin's ABI and
  // the host's when it is refused. Loading the same file twice returns the same plugin.
  const LoadedPlugin& load_path(const std::filesystem::path& path);

  // Resolves a name written by an operator: a path (contains '/' or ends in .so), a reverse-DNS
  // name, or a short name, of the given kind. Throws Error listing what was searched. When several
  // files carry the name, the one in the earliest search directory is used (as PATH does; a file
  // loaded by path outside them comes last) and a warning names it and the others, once per name.
  const LoadedPlugin& find(std::string_view name_or_path, int32_t kind);

  // Every plugin found in the search directories (libraries that are not plugins are skipped).
  std::vector<const LoadedPlugin*> discover();

  // The process-wide registry used by the CLI and servers.
  static PluginRegistry& global();

 private:
  struct Library;
  const LoadedPlugin& load_locked(const std::filesystem::path& path);
  void scan_locked();
  const LoadedPlugin& pick_by_search_order(const std::vector<const LoadedPlugin*>& matches,
                                           std::string_view name);

  mutable std::mutex mutex_;
  std::vector<std::filesystem::path> directories_;
  std::vector<std::unique_ptr<Library>> libraries_;
  bool scanned_ = false;
  std::vector<std::filesystem::path> warned_ambiguous_;  // chosen files whose rivals were named
};

}  // namespace headway::core
