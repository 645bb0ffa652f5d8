#include <headway/core/error.h>
#include <headway/core/plugin_registry.h>

// Boost.DLL on std::filesystem rather than Boost.Filesystem: one path type across the host.
#define BOOST_DLL_USE_STD_FS 1
#include <cxxabi.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <link.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <system_error>
#include <tuple>

#include "int_option_bounds.h"
#include "readable_memory.h"
#include "shared_object_check.h"

namespace headway::core {
namespace fs = std::filesystem;

namespace {

std::string to_string(hw_str s) { return s.data ? std::string(s.data, s.size) : std::string(); }

// Size of each struct as laid out in ABI 1.0: a plugin of any 1.x minor provides at least this,
// and the host reads a later minor's fields only where struct_size covers them. When a minor adds
// fields to a struct, its 1.0 size here must stay the offset of the first new field, never
// sizeof(): a plugin built against the older minor would be refused (a 1.1 KV transport was,
// until its table's size was pinned to where 1.2's peer links begin).
constexpr uint32_t kDescriptorSizeV1_0 = sizeof(hw_plugin_descriptor);
constexpr uint32_t kSchedulerTableSizeV1_0 = sizeof(hw_scheduler_table);
constexpr uint32_t kRouterTableSizeV1_0 = offsetof(hw_router_table, set_engine_limits);
constexpr uint32_t kKvTransportTableSizeV1_0 = offsetof(hw_kv_transport_table, peer_rendezvous);
constexpr uint32_t kModelTableSizeV1_0 = sizeof(hw_model_table);
#if defined(__x86_64__) || defined(__aarch64__)
// The 1.0 sizes on LP64, written out: a minor that appends to one of these structs breaks the
// build here, which is the reminder to pin that constant to the offset of its first new field.
static_assert(kDescriptorSizeV1_0 == 104 && kSchedulerTableSizeV1_0 == 40 &&
                  kRouterTableSizeV1_0 == 32 && kKvTransportTableSizeV1_0 == 40 &&
                  kModelTableSizeV1_0 == 56,
              "an ABI struct grew: pin its 1.0 size above (see the comment)");
#endif

uint32_t minimum_table_size(int32_t kind) {
  switch (kind) {
    case HW_KIND_STEP_SCHEDULER:
      return kSchedulerTableSizeV1_0;
    case HW_KIND_ROUTER:
      return kRouterTableSizeV1_0;
    case HW_KIND_KV_TRANSPORT:
      return kKvTransportTableSizeV1_0;
    case HW_KIND_MODEL:
      return kModelTableSizeV1_0;
    default:
      return 0;
  }
}

// This host's size of each table: the most of a plugin's table it ever reads.
uint32_t host_table_size(int32_t kind) {
  switch (kind) {
    case HW_KIND_STEP_SCHEDULER:
      return sizeof(hw_scheduler_table);
    case HW_KIND_ROUTER:
      return sizeof(hw_router_table);
    case HW_KIND_KV_TRANSPORT:
      return sizeof(hw_kv_transport_table);
    case HW_KIND_MODEL:
      return sizeof(hw_model_table);
    default:
      return 0;
  }
}

// Names the first mandatory function a table lacks, or returns empty.
std::string missing_function(const hw_plugin_descriptor& d) {
  switch (d.kind) {
    case HW_KIND_STEP_SCHEDULER: {
      const auto& t = *static_cast<const hw_scheduler_table*>(d.table);
      if (!t.create) return "create";
      if (!t.destroy) return "destroy";
      if (!t.get_limits) return "get_limits";
      if (!t.schedule) return "schedule";
      return {};
    }
    case HW_KIND_ROUTER: {
      const auto& t = *static_cast<const hw_router_table*>(d.table);
      if (!t.create) return "create";
      if (!t.destroy) return "destroy";
      if (!t.route) return "route";
      return {};
    }
    case HW_KIND_KV_TRANSPORT: {
      const auto& t = *static_cast<const hw_kv_transport_table*>(d.table);
      if (!t.create) return "create";
      if (!t.destroy) return "destroy";
      if (!t.start) return "start";
      if (!t.poll) return "poll";
      return {};
    }
    case HW_KIND_MODEL: {
      const auto& t = *static_cast<const hw_model_table*>(d.table);
      if (!t.create) return "create";
      if (!t.destroy) return "destroy";
      if (!t.get_info) return "get_info";
      if (!t.init_kv) return "init_kv";
      if (!t.forward) return "forward";
      return {};
    }
    default:
      return {};
  }
}

// Bounds on what a descriptor describes (abi.h states them): far above any real plugin's, they
// turn a garbage size into a refusal naming the field instead of a bad_alloc or a read past the
// plugin's memory.
constexpr uint64_t kMaxNameBytes = 256;    // name, short_name, version, option keys, values
constexpr uint64_t kMaxTextBytes = 65536;  // 64 KiB: description, option docs, default strings
constexpr uint32_t kMaxOptions = 1024;     // option_count, allowed_count

void check_text(hw_str s, uint64_t limit, const std::string& where, std::string_view field) {
  if (s.size > 0 && s.data == nullptr) {
    throw Error(
        fmt::format("{}: refused: {} has size {} but no data (NULL)", where, field, s.size));
  }
  if (s.size > limit) {
    throw Error(fmt::format("{}: refused: {} is {} bytes long; at most {} are allowed", where,
                            field, s.size, limit));
  }
  if (!readable_memory(s.data, s.size)) {
    throw Error(fmt::format("{}: refused: {} points to memory that cannot be read ({})", where,
                            field, static_cast<const void*>(s.data)));
  }
}

// A pointer from the plugin that the host is about to read through.
void check_readable(const void* address, uint64_t bytes, const std::string& where,
                    std::string_view what) {
  if (!readable_memory(address, bytes)) {
    throw Error(fmt::format("{}: refused: {} ({}, {} bytes) is not readable memory", where, what,
                            address, bytes));
  }
}

// Checks the option schema itself, so that a plugin with a broken schema is refused at load.
void check_option_schema(const hw_plugin_descriptor& d, const std::string& where) {
  if (d.option_count > 0 && d.options == nullptr) {
    throw Error(where + ": option_count is " + std::to_string(d.option_count) +
                " but the option table is NULL");
  }
  if (d.option_count > kMaxOptions) {
    throw Error(fmt::format("{}: refused: option_count is {}; at most {} options are allowed",
                            where, d.option_count, kMaxOptions));
  }
  check_readable(d.options, uint64_t{d.option_count} * sizeof(hw_option_spec), where,
                 "the option table");
  std::map<std::string, uint32_t> index_of_key;
  for (uint32_t i = 0; i < d.option_count; ++i) {
    const hw_option_spec& o = d.options[i];
    check_text(o.key, kMaxNameBytes, where, fmt::format("option #{}'s key", i));
    std::string key = to_string(o.key);
    if (key.empty()) throw Error(fmt::format("{}: option #{} has an empty key", where, i));
    if (const auto [earlier, fresh] = index_of_key.emplace(key, i); !fresh) {
      throw Error(fmt::format("{}: options #{} and #{} are both named '{}'", where, earlier->second,
                              i, key));
    }
    check_text(o.doc, kMaxTextBytes, where, fmt::format("option '{}''s doc", key));
    check_text(o.default_string, kMaxTextBytes, where,
               fmt::format("option '{}''s default string", key));
    if (o.type < HW_OPTION_BOOL || o.type > HW_OPTION_ENUM) {
      throw Error(fmt::format("{}: option '{}' has unknown type {}", where, key, o.type));
    }
    if (o.type == HW_OPTION_ENUM) {
      if (o.allowed_count == 0 || o.allowed_values == nullptr) {
        throw Error(fmt::format("{}: enum option '{}' lists no allowed values", where, key));
      }
      if (o.allowed_count > kMaxOptions) {
        throw Error(
            fmt::format("{}: refused: enum option '{}' lists {} values; at most {} are "
                        "allowed",
                        where, key, o.allowed_count, kMaxOptions));
      }
      check_readable(o.allowed_values, uint64_t{o.allowed_count} * sizeof(hw_str), where,
                     fmt::format("enum option '{}''s allowed values", key));
      bool found = false;
      for (uint32_t a = 0; a < o.allowed_count; ++a) {
        check_text(o.allowed_values[a], kMaxNameBytes, where,
                   fmt::format("enum option '{}''s value #{}", key, a));
        found = found || to_string(o.allowed_values[a]) == to_string(o.default_string);
      }
      if (!found) {
        throw Error(fmt::format("{}: enum option '{}' has default '{}' outside its allowed values",
                                where, key, to_string(o.default_string)));
      }
    }
    if (o.type == HW_OPTION_BOOL && o.default_int != 0 && o.default_int != 1) {
      throw Error(fmt::format("{}: bool option '{}' has default {} (0 or 1 are false and true)",
                              where, key, o.default_int));
    }
    if (o.type == HW_OPTION_INT || o.type == HW_OPTION_DOUBLE) {
      for (const auto& [has, bound, which] :
           {std::tuple{o.has_min, o.min_value, "minimum"}, {o.has_max, o.max_value, "maximum"}}) {
        if (has == 0) continue;
        if (std::isnan(bound) || (o.type == HW_OPTION_INT && bound != std::floor(bound))) {
          throw Error(fmt::format("{}: {} option '{}' has {} {}, not {}", where,
                                  o.type == HW_OPTION_INT ? "integer" : "double", key, which, bound,
                                  o.type == HW_OPTION_INT ? "an integer" : "a number"));
        }
      }
      if (o.has_min && o.has_max && o.min_value > o.max_value) {
        throw Error(fmt::format("{}: option '{}' has minimum {} above its maximum {}", where, key,
                                o.min_value, o.max_value));
      }
      // An integer's default compared as an integer (int_option_bounds.h), a double's as a double.
      const bool outside = o.type == HW_OPTION_INT
                               ? (o.has_min && int_below(o.default_int, o.min_value)) ||
                                     (o.has_max && int_above(o.default_int, o.max_value))
                               : (o.has_min && o.default_double < o.min_value) ||
                                     (o.has_max && o.default_double > o.max_value);
      if (o.type == HW_OPTION_DOUBLE && std::isnan(o.default_double)) {
        throw Error(fmt::format("{}: option '{}' has default NaN", where, key));
      }
      if (outside) {
        throw Error(fmt::format("{}: option '{}' has default {} outside its range", where, key,
                                o.type == HW_OPTION_INT ? fmt::format("{}", o.default_int)
                                                        : fmt::format("{}", o.default_double)));
      }
    }
  }
}

void check_descriptor(const hw_plugin_descriptor* d, const fs::path& path) {
  const std::string where = "plugin " + path.string();
  if (d == nullptr) throw Error(where + ": " HW_PLUGIN_ENTRY_SYMBOL "() returned NULL");
  check_readable(d, kDescriptorSizeV1_0, where,
                 "the descriptor " HW_PLUGIN_ENTRY_SYMBOL "() returned");
  if (d->abi_major != HW_ABI_MAJOR || d->abi_minor > HW_ABI_MINOR) {
    throw Error(fmt::format(
        "{}: refused: built for Headway plugin ABI {}.{}, this host provides ABI {}.{} (needs the "
        "same major and a minor no newer than the host's)",
        where, d->abi_major, d->abi_minor, HW_ABI_MAJOR, HW_ABI_MINOR));
  }
  if (d->struct_size < kDescriptorSizeV1_0) {
    throw Error(fmt::format("{}: refused: descriptor struct_size {} is smaller than ABI {}.0's {}",
                            where, d->struct_size, HW_ABI_MAJOR, kDescriptorSizeV1_0));
  }
  uint32_t table_size = minimum_table_size(d->kind);
  if (table_size == 0)
    throw Error(fmt::format("{}: refused: unknown plugin kind {}", where, d->kind));
  check_text(d->name, kMaxNameBytes, where, "the descriptor's name");
  check_text(d->short_name, kMaxNameBytes, where, "the descriptor's short_name");
  check_text(d->version, kMaxNameBytes, where, "the descriptor's version");
  check_text(d->description, kMaxTextBytes, where, "the descriptor's description");
  if (d->name.size == 0 || d->short_name.size == 0) {
    throw Error(where + ": refused: the descriptor has no name or short name");
  }
  if (d->table == nullptr) throw Error(where + ": refused: the function table is NULL");
  check_readable(d->table, table_size, where, "the function table");
  uint32_t declared = *static_cast<const uint32_t*>(d->table);
  if (declared < table_size) {
    throw Error(fmt::format("{}: refused: {} table struct_size {} is smaller than ABI {}.0's {}",
                            where, kind_name(d->kind), declared, HW_ABI_MAJOR, table_size));
  }
  // The host reads a later minor's fields where struct_size covers them: those bytes too.
  check_readable(d->table, std::min(declared, host_table_size(d->kind)), where,
                 "the function table");
  if (std::string f = missing_function(*d); !f.empty()) {
    throw Error(fmt::format("{}: refused: mandatory function '{}' of the {} table is NULL", where,
                            f, kind_name(d->kind)));
  }
  check_option_schema(*d, where);
}

// What dlopen said, from Boost.DLL's wrapping of it ("boost::dll::shared_library::load() failed
// (dlerror system message: <what dlopen said>): <an unrelated errno text>"), with an undefined
// symbol demangled and the usual cause named.
std::string load_failure(const std::string& boost_message) {
  constexpr std::string_view kPrefix = "(dlerror system message: ";
  std::string message = boost_message;
  const size_t begin = message.find(kPrefix);
  const size_t end = message.rfind("): ");
  if (begin != std::string::npos && end != std::string::npos && end > begin) {
    message = message.substr(begin + kPrefix.size(), end - begin - kPrefix.size());
  }
  constexpr std::string_view kUndefined = "undefined symbol: ";
  const size_t at = message.find(kUndefined);
  if (at == std::string::npos) return message;
  const std::string symbol = message.substr(at + kUndefined.size());
  int status = 0;
  char* readable = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  if (status == 0 && readable != nullptr) message += fmt::format(" ({})", readable);
  std::free(readable);
  return message +
         "; no library loaded here provides it: either the plugin was not linked with the library "
         "that does (headway_add_plugin links with --no-undefined, which catches that at build "
         "time), or this machine has an older version of a library it was built against "
         "(libstdc++, the CUDA runtime)";
}

bool looks_like_path(std::string_view s) {
  return s.find('/') != std::string_view::npos || s.ends_with(".so") || s.ends_with(".dylib");
}

}  // namespace

std::string_view kind_name(int32_t kind) {
  switch (kind) {
    case HW_KIND_STEP_SCHEDULER:
      return "step scheduler";
    case HW_KIND_ROUTER:
      return "router";
    case HW_KIND_KV_TRANSPORT:
      return "KV transport";
    case HW_KIND_MODEL:
      return "model";
    default:
      return "unknown kind";
  }
}

std::string LoadedPlugin::name() const { return to_string(descriptor->name); }
std::string LoadedPlugin::short_name() const { return to_string(descriptor->short_name); }
std::string LoadedPlugin::version() const { return to_string(descriptor->version); }

struct PluginRegistry::Library {
  boost::dll::shared_library library;
  LoadedPlugin plugin;
};

PluginRegistry::PluginRegistry() {
  if (const char* env = std::getenv("HEADWAY_PLUGIN_PATH"); env != nullptr) {
    std::string_view rest(env);
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string_view part = rest.substr(0, colon);
      if (!part.empty()) directories_.emplace_back(part);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  std::error_code ec;
  fs::path exe_dir = boost::dll::program_location(ec).parent_path();
  if (!ec) {
    directories_.push_back(exe_dir / ".." / "lib" / "headway" / "plugins");
  }
}

PluginRegistry::~PluginRegistry() = default;

PluginRegistry& PluginRegistry::global() {
  // Never destroyed: libraries must outlive every static that may still hold a plugin instance.
  static PluginRegistry* registry = new PluginRegistry();
  return *registry;
}

void PluginRegistry::add_search_directory(const fs::path& directory) {
  std::lock_guard lock(mutex_);
  directories_.insert(directories_.begin(), directory);
  scanned_ = false;
}

std::vector<fs::path> PluginRegistry::search_directories() const {
  std::lock_guard lock(mutex_);
  return directories_;
}

const LoadedPlugin& PluginRegistry::load_path(const fs::path& path) {
  std::lock_guard lock(mutex_);
  return load_locked(path);
}

const LoadedPlugin& PluginRegistry::load_locked(const fs::path& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);
  if (ec) canonical = path;
  for (const auto& lib : libraries_) {
    if (lib->plugin.path == canonical) return lib->plugin;
  }
  if (!fs::exists(canonical))
    throw Error("plugin " + path.string() + ": no such file", HW_NOT_FOUND);
  // Before dlopen: a truncated file would kill the process with SIGBUS there.
  if (const std::string problem = shared_object_problem(canonical); !problem.empty()) {
    throw Error("plugin " + canonical.string() + ": cannot be loaded: " + problem,
                HW_INVALID_ARGUMENT);
  }

  auto entry = std::make_unique<Library>();
  try {
    // RTLD_NODELETE: a plugin stays mapped after its registry goes. Libraries a plugin pulls in
    // (libgomp's parked workers, cuBLASLt's and NCCL's private runtimes) keep threads, atexit
    // handlers and allocations that must not outlive their code; unmapping them made LeakSanitizer
    // report their start-up allocations from an "<unknown module>" and risks calls into freed code.
    // Boost.DLL passes POSIX load modes through to dlopen, so the native flag can be added.
    const auto mode = static_cast<boost::dll::load_mode::type>(
        boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local | RTLD_NODELETE);
    entry->library.load(canonical, mode);
  } catch (const std::exception& e) {
    throw Error("plugin " + canonical.string() + ": cannot be loaded: " + load_failure(e.what()));
  }
  if (!entry->library.has(HW_PLUGIN_ENTRY_SYMBOL)) {
    // The Itanium C++ name of `const hw_plugin_descriptor* headway_plugin_entry()`: the entry was
    // written without extern "C" (the export macros add it).
    const bool mangled = entry->library.has("_Z20headway_plugin_entryv");
    throw Error("plugin " + canonical.string() +
                ": not a Headway plugin (no exported symbol " HW_PLUGIN_ENTRY_SYMBOL ")" +
                (mangled ? "; it exports a C++-mangled " HW_PLUGIN_ENTRY_SYMBOL
                           "(): declare it extern \"C\", or use an export macro"
                         : ""));
  }
  // Calling a data symbol of that name would jump into data and kill the process (and with it a
  // `plugin list` over a directory holding one such file): the symbol table says what it is.
  void* address = ::dlsym(entry->library.native(), HW_PLUGIN_ENTRY_SYMBOL);
  Dl_info info{};
  void* found = nullptr;  // dladdr1 hands back the symbol's const ElfW(Sym)*
  if (address != nullptr && ::dladdr1(address, &info, &found, RTLD_DL_SYMENT) != 0 &&
      found != nullptr) {
    const unsigned type = ELF64_ST_TYPE(static_cast<const ElfW(Sym)*>(found)->st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) {
      throw Error("plugin " + canonical.string() +
                  ": its " HW_PLUGIN_ENTRY_SYMBOL
                  " is not a function (an exported variable of that name?); a plugin exports "
                  "const hw_plugin_descriptor* " HW_PLUGIN_ENTRY_SYMBOL "(void)");
    }
  }
  auto entry_fn = entry->library.get<const hw_plugin_descriptor*()>(HW_PLUGIN_ENTRY_SYMBOL);
  // A hand-written entry can throw; across the C ABI that surfaced as the bare exception text,
  // named after nothing (helper-164).
  const hw_plugin_descriptor* descriptor = nullptr;
  const std::string thrown_from =
      "plugin " + canonical.string() + ": an exception escaped its " HW_PLUGIN_ENTRY_SYMBOL "()";
  const char* const must_not = "; the entry returns its descriptor and throws nothing";
  try {
    descriptor = entry_fn();
  } catch (const std::exception& e) {
    throw Error(thrown_from + " (" + e.what() + ")" + must_not, HW_INTERNAL);
  } catch (...) {
    throw Error(thrown_from + must_not, HW_INTERNAL);
  }
  check_descriptor(descriptor, canonical);
  entry->plugin.path = canonical;
  entry->plugin.descriptor = descriptor;
  libraries_.push_back(std::move(entry));
  return libraries_.back()->plugin;
}

void PluginRegistry::scan_locked() {
  if (scanned_) return;
  scanned_ = true;
  // Directories may have been added in front since the last scan: found_in is the earliest one.
  for (const auto& lib : libraries_) lib->plugin.found_in.clear();
  for (const fs::path& dir : directories_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& item : fs::directory_iterator(dir, ec)) {
      if (item.path().extension() == ".so") files.push_back(item.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      try {
        const LoadedPlugin& loaded = load_locked(file);
        // The directory decides precedence, also for a symlink to a file elsewhere.
        for (const auto& lib : libraries_) {
          if (&lib->plugin == &loaded && lib->plugin.found_in.empty()) lib->plugin.found_in = dir;
        }
      } catch (const Error& e) {
        // Not a plugin, or a refused one: it stays invisible to name lookup (loading it by path
        // reports the same). Said once, so that a broken plugin does not vanish silently.
        spdlog::warn("skipping {}", e.what());
      }
    }
  }
}

const LoadedPlugin& PluginRegistry::find(std::string_view name_or_path, int32_t kind) {
  std::lock_guard lock(mutex_);
  if (looks_like_path(name_or_path)) {
    const LoadedPlugin& plugin = load_locked(fs::path(name_or_path));
    if (kind != 0 && plugin.kind() != kind) {
      throw Error(fmt::format("plugin {}: is a {}, but a {} was expected", plugin.path.string(),
                              kind_name(plugin.kind()), kind_name(kind)));
    }
    return plugin;
  }
  scan_locked();
  std::vector<std::string> available;
  std::vector<const LoadedPlugin*> matches;
  const LoadedPlugin* other_kind = nullptr;
  for (const auto& lib : libraries_) {
    const LoadedPlugin& p = lib->plugin;
    const bool named = p.name() == name_or_path || p.short_name() == name_or_path;
    if (kind != 0 && p.kind() != kind) {
      if (named) other_kind = &p;
      continue;
    }
    if (named) matches.push_back(&p);
    available.push_back(p.short_name());
  }
  if (!matches.empty()) return pick_by_search_order(matches, name_or_path);
  if (other_kind != nullptr) {
    throw Error(fmt::format("plugin '{}' is a {}, but a {} was expected (available: {})",
                            name_or_path, kind_name(other_kind->kind()), kind_name(kind),
                            available.empty() ? std::string("none")
                                              : fmt::format("{}", fmt::join(available, ", "))),
                HW_INVALID_ARGUMENT);
  }
  std::string dirs;
  for (const fs::path& d : directories_) dirs += (dirs.empty() ? "" : ", ") + d.string();
  std::string names;
  for (const std::string& n : available) names += (names.empty() ? "" : ", ") + n;
  // Headway's GPU plugins are named in its docs and configs but built only where CMake found nvcc:
  // their absence is a build matter (or a library they could not load), not a typo.
  const bool gpu_plugin = name_or_path == "cuda" || name_or_path == "nccl";
  throw Error(fmt::format("unknown {}plugin '{}' (available: {}; searched: {}){}",
                          kind == 0 ? std::string() : std::string(kind_name(kind)) + " ",
                          name_or_path, names.empty() ? "none" : names, dirs,
                          gpu_plugin ? "; Headway's cuda model and nccl transport are built only "
                                       "where CMake finds nvcc 12 or later (docs/cuda_model.md); "
                                       "where they were built, a warning above says why they "
                                       "did not load"
                                     : ""),
              HW_NOT_FOUND);
}

const LoadedPlugin& PluginRegistry::pick_by_search_order(
    const std::vector<const LoadedPlugin*>& matches, std::string_view name) {
  if (matches.size() == 1) return *matches.front();
  // Rank: the index of the search directory a scan found the file in; files loaded only by path
  // come last.
  const auto rank = [&](const LoadedPlugin* p) {
    const auto at = std::find(directories_.begin(), directories_.end(), p->found_in);
    return static_cast<size_t>(at - directories_.begin());
  };
  const LoadedPlugin* chosen = matches.front();
  for (const LoadedPlugin* p : matches) {
    if (rank(p) < rank(chosen)) chosen = p;
  }
  // Once per chosen file, whichever of its names was asked for.
  if (std::find(warned_ambiguous_.begin(), warned_ambiguous_.end(), chosen->path) ==
      warned_ambiguous_.end()) {
    warned_ambiguous_.push_back(chosen->path);
    std::string others;
    for (const LoadedPlugin* p : matches) {
      if (p == chosen) continue;
      others += fmt::format("{}{} ({} {})", others.empty() ? "" : ", ", p->path.string(), p->name(),
                            p->version());
    }
    spdlog::warn(
        "plugin name '{}' is carried by several files: using {} ({} {}), the first in search "
        "order; not {}. Name a plugin by path to choose another.",
        name, chosen->path.string(), chosen->name(), chosen->version(), others);
  }
  return *chosen;
}

std::vector<const LoadedPlugin*> PluginRegistry::discover() {
  std::lock_guard lock(mutex_);
  scan_locked();
  std::vector<const LoadedPlugin*> out;
  for (const auto& lib : libraries_) out.push_back(&lib->plugin);
  return out;
}

}  // namespace headway::core
