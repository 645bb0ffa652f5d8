#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace headway::core {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const fs::path kTestPlugins = HEADWAY_TEST_PLUGIN_DIR;
const fs::path kRealPlugins = HEADWAY_PLUGIN_DIR;

fs::path test_plugin(const std::string& name) {
  return fs::weakly_canonical(kTestPlugins / (name + ".so"));
}

// Runs `body`, expects an Error and returns it for inspection.
Error expect_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error was thrown";
  return Error("(none)");
}

std::string abi(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// `plugin` as a deployment chooses it at `where`, with `options` (null: every option at its
// default).
PluginChoice choice_of(const LoadedPlugin& plugin, std::string where,
                       const toml::table* options = nullptr) {
  PluginChoice choice;
  choice.where = std::move(where);
  choice.plugin = &plugin;
  choice.options = std::make_shared<const PluginOptions>(
      PluginOptions::from_toml(*plugin.descriptor, options, "test.options"));
  return choice;
}

TEST(PluginRegistry, LoadsTheGoodPluginByPath) {
  PluginRegistry registry;
  const LoadedPlugin& p = registry.load_path(test_plugin("test_good_scheduler"));
  EXPECT_EQ(p.name(), "org.headway.test.good_scheduler");
  EXPECT_EQ(p.short_name(), "test_good");
  EXPECT_EQ(p.version(), "1.2.3");
  EXPECT_EQ(p.kind(), HW_KIND_STEP_SCHEDULER);
  EXPECT_EQ(p.path, test_plugin("test_good_scheduler"));
  ASSERT_NE(p.descriptor, nullptr);
  EXPECT_EQ(p.descriptor->abi_major, HW_ABI_MAJOR);
  EXPECT_EQ(p.descriptor->option_count, 7u);
  const auto& table = p.table<hw_scheduler_table>();
  EXPECT_EQ(table.struct_size, sizeof(hw_scheduler_table));
  EXPECT_NE(table.schedule, nullptr);
}

TEST(PluginRegistry, LoadingTwiceReturnsTheSameObject) {
  PluginRegistry registry;
  const LoadedPlugin& a = registry.load_path(test_plugin("test_good_scheduler"));
  const LoadedPlugin& b = registry.load_path(test_plugin("test_good_scheduler"));
  EXPECT_EQ(&a, &b);
  // A different spelling of the same file is the same plugin too.
  const LoadedPlugin& c =
      registry.load_path(kTestPlugins / ".." / kTestPlugins.filename() / "test_good_scheduler.so");
  EXPECT_EQ(&a, &c);
  // Scanning a directory that holds the already loaded file does not load it a second time.
  registry.add_search_directory(kTestPlugins);
  auto plugins = registry.discover();
  EXPECT_EQ(std::count_if(plugins.begin(), plugins.end(),
                          [](const LoadedPlugin* p) { return p->short_name() == "test_good"; }),
            1);
}

TEST(PluginRegistry, FindsByShortNameReverseDnsNameAndPath) {
  PluginRegistry registry;
  registry.add_search_directory(kTestPlugins);
  const LoadedPlugin& by_short = registry.find("test_good", HW_KIND_STEP_SCHEDULER);
  const LoadedPlugin& by_dns =
      registry.find("org.headway.test.good_scheduler", HW_KIND_STEP_SCHEDULER);
  const LoadedPlugin& by_path =
      registry.find(test_plugin("test_good_scheduler").string(), HW_KIND_STEP_SCHEDULER);
  const LoadedPlugin& by_load = registry.load_path(test_plugin("test_good_scheduler"));
  EXPECT_EQ(&by_short, &by_dns);
  EXPECT_EQ(&by_short, &by_path);
  EXPECT_EQ(&by_short, &by_load);
  EXPECT_EQ(by_short.name(), "org.headway.test.good_scheduler");
  // kind 0 means any kind.
  EXPECT_EQ(&registry.find("test_good", 0), &by_short);
}

TEST(PluginRegistry, AddedDirectoriesAreSearchedFirst) {
  PluginRegistry registry;
  registry.add_search_directory("/nonexistent/b");
  registry.add_search_directory(kTestPlugins);
  auto dirs = registry.search_directories();
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], kTestPlugins);
  EXPECT_EQ(dirs[1], fs::path("/nonexistent/b"));
}

// Two files carrying one name (a copied template left unrenamed, an installed Headway beside a
// build): the earliest search directory wins, whatever order the files were loaded in.
TEST(PluginRegistry, ANameCarriedByTwoFilesResolvesInSearchOrder) {
  const fs::path root = fs::temp_directory_path() / ("headway_shadow_" + std::to_string(getpid()));
  const fs::path first = root / "first", second = root / "second";
  fs::create_directories(first);
  fs::create_directories(second);
  for (const fs::path& dir : {first, second}) {
    fs::copy_file(test_plugin("test_good_scheduler"), dir / "test_good_scheduler.so");
  }
  {
    PluginRegistry registry;
    registry.add_search_directory(second);
    registry.add_search_directory(first);  // added last: searched first
    const LoadedPlugin& loaded_first = registry.load_path(second / "test_good_scheduler.so");
    const LoadedPlugin& found = registry.find("test_good", HW_KIND_STEP_SCHEDULER);
    EXPECT_EQ(found.path, fs::weakly_canonical(first / "test_good_scheduler.so"));
    EXPECT_NE(&found, &loaded_first);
    // The same answer by the other name.
    EXPECT_EQ(&registry.find("org.headway.test.good_scheduler", HW_KIND_STEP_SCHEDULER), &found);
  }
  {
    // A symlink counts where it lies: a directory searched before `first` that links to
    // `second`'s file makes that file win.
    const fs::path linked = root / "linked";
    fs::create_directories(linked);
    fs::create_symlink(second / "test_good_scheduler.so", linked / "good_link.so");
    PluginRegistry registry;
    registry.add_search_directory(second);
    registry.add_search_directory(first);
    registry.add_search_directory(linked);  // searched first
    EXPECT_EQ(registry.find("test_good", HW_KIND_STEP_SCHEDULER).path,
              fs::weakly_canonical(second / "test_good_scheduler.so"));
  }
  fs::remove_all(root);
}

TEST(PluginRegistry, FindsTheRealPlugins) {
  PluginRegistry registry;
  registry.add_search_directory(kRealPlugins);
  EXPECT_EQ(registry.find("chunked", HW_KIND_STEP_SCHEDULER).name(),
            "org.headway.scheduler.chunked");
  EXPECT_EQ(registry.find("sim", HW_KIND_MODEL).name(), "org.headway.model.sim");
  EXPECT_EQ(registry.find("single", HW_KIND_ROUTER).name(), "org.headway.router.single");
  EXPECT_EQ(registry.find("least_loaded", HW_KIND_ROUTER).name(),
            "org.headway.router.least_loaded");
}

TEST(PluginRegistry, DiscoverSkipsBrokenLibraries) {
  PluginRegistry registry;
  registry.add_search_directory(kTestPlugins);
  std::vector<std::string> names;
  for (const LoadedPlugin* p : registry.discover()) names.push_back(p->short_name());
  EXPECT_THAT(names, ::testing::Contains("test_good"));
  EXPECT_THAT(names, ::testing::Contains("test_throwing"));
  for (const char* refused :
       {"test_abi_major", "test_abi_minor", "test_missing_function", "test_small_descriptor",
        "test_huge_description", "test_garbage_descriptor", "test_garbage_string",
        "test_bad_schema"}) {
    EXPECT_THAT(names, Not(::testing::Contains(refused)));
  }
}

TEST(PluginRegistry, RefusesANewerAbiMajor) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_abi_major");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("refused"));
  EXPECT_THAT(e.what(), HasSubstr("ABI " + abi(HW_ABI_MAJOR + 1, 0)));
  EXPECT_THAT(e.what(), HasSubstr("host provides ABI " + abi(HW_ABI_MAJOR, HW_ABI_MINOR)));
}

TEST(PluginRegistry, RefusesANewerAbiMinor) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_abi_minor");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("ABI " + abi(HW_ABI_MAJOR, HW_ABI_MINOR + 1)));
  EXPECT_THAT(e.what(), HasSubstr("host provides ABI " + abi(HW_ABI_MAJOR, HW_ABI_MINOR)));
}

// A plugin built against an older 1.x minor has the shorter tables of that minor; the host reads
// a newer field only where struct_size covers it, so such a plugin loads and works.
TEST(PluginRegistry, LoadsAKvTransportBuiltForAbi11WithoutPeerLinks) {
  PluginRegistry registry;
  const LoadedPlugin& plugin = registry.load_path(test_plugin("test_abi_1_1_transport"));
  EXPECT_EQ(plugin.descriptor->abi_minor, 1);
  EXPECT_EQ(plugin.table<hw_kv_transport_table>().struct_size,
            offsetof(hw_kv_transport_table, peer_rendezvous));
  const PluginChoice choice = choice_of(plugin, "test: kv_transport");
  VirtualClock clock;
  HostServices host("engine0/test_abi_1_1_transport", &clock);
  KvTransportInstance transport(choice, host);
  EXPECT_FALSE(transport.has_peer_links());
  EXPECT_THROW(transport.peer_rendezvous(), Error);
  const hw_kv_transfer transfer{};
  const uint64_t handle = transport.start(transfer);
  EXPECT_EQ(transport.poll(handle).state, HW_TRANSFER_DONE);
}

// Two engines as a router's create() sees them: alive, mixed, load fields zero.
std::vector<hw_engine_load> two_live_engines() {
  std::vector<hw_engine_load> engines(2);
  for (uint32_t e = 0; e < 2; ++e) {
    engines[e].engine_index = e;
    engines[e].alive = 1;
  }
  return engines;
}

TEST(PluginRegistry, LoadsARouterBuiltForAbi15WithoutEngineLimits) {
  PluginRegistry registry;
  const LoadedPlugin& plugin = registry.load_path(test_plugin("test_abi_1_5_router"));
  EXPECT_EQ(plugin.descriptor->abi_minor, 5);
  EXPECT_EQ(plugin.table<hw_router_table>().struct_size,
            offsetof(hw_router_table, set_engine_limits));
  const PluginChoice choice = choice_of(plugin, "test: router");
  VirtualClock clock;
  HostServices host("router test_abi_1_5_router", &clock);
  std::vector<hw_engine_load> engines = two_live_engines();
  RouterInstance router(choice, engines, host);
  EXPECT_FALSE(router.reads_engine_limits());
  EXPECT_FALSE(router.reads_model_lengths());
  // Not called: the table has no such entry (the plugin aborts if the host reads past its end).
  const std::vector<hw_engine_limits> limits = {{sizeof(hw_engine_limits), 0, 1},
                                                {sizeof(hw_engine_limits), 1, 1}};
  router.set_engine_limits(limits);
  engines[0].outstanding_tokens = 10;
  engines[1].outstanding_tokens = 5;
  const hw_route_request request{1, 8, 8, 0, hw_str{"", 0}};
  EXPECT_EQ(router.route(request, engines).prefill_engine, 1u);
}

// A router built for ABI 1.6 reads the waiting-queue bounds from the host's larger elements and
// knows no lengths: the host does not judge its placements by max_model_len (it admits only what
// every engine holds for such a router, Cluster::admitted_max_model_len).
TEST(PluginRegistry, LoadsARouterBuiltForAbi16AndDoesNotJudgeItByLength) {
  PluginRegistry registry;
  const LoadedPlugin& plugin = registry.load_path(test_plugin("test_abi_1_6_router"));
  EXPECT_EQ(plugin.descriptor->abi_minor, 6);
  const PluginChoice choice = choice_of(plugin, "test: router");
  VirtualClock clock;
  HostServices host("router test_abi_1_6_router", &clock);
  std::vector<hw_engine_load> engines = two_live_engines();
  // Engine 0 holds 64 tokens and its queue is full; engine 1 holds 4,096.
  const std::vector<hw_engine_limits> limits = {{sizeof(hw_engine_limits), 0, 1, 64},
                                                {sizeof(hw_engine_limits), 1, 0, 4096}};
  RouterInstance router(choice, engines, host, limits);
  EXPECT_TRUE(router.reads_engine_limits());
  EXPECT_FALSE(router.reads_model_lengths());
  engines[0].waiting = 1;
  engines[1].outstanding_tokens = 500;
  const hw_route_request request{1, 1000, 8, 0, hw_str{"", 0}};
  // The bound was read through the host's stride: the full engine 0 is passed over.
  EXPECT_EQ(router.route(request, engines).prefill_engine, 1u);
  // With room there, it goes to engine 0, which cannot hold it: not refused here.
  engines[0].waiting = 0;
  EXPECT_EQ(router.route(request, engines).prefill_engine, 0u);
}

// A router that failed a kv_events() call may have missed what it said (helper-202's and
// helper-205's reviews): after a failed announcement the host announces the engine again before its
// next events; after failed events, the next ones begin with ALL_REMOVED. Other engines are not
// concerned.
TEST(PluginRegistry, ARouterThatFailedOnKvEventsIsToldAgainWhatItMissed) {
  PluginRegistry registry;
  const LoadedPlugin& plugin = registry.load_path(test_plugin("test_kv_events_router"));
  toml::table options;
  options.insert("fail_first_announcement", true);
  options.insert("fail_first_events", true);
  const PluginChoice choice = choice_of(plugin, "test: router", &options);
  VirtualClock clock;
  HostServices host("router test_kv_events_router", &clock);
  std::vector<hw_engine_load> engines = two_live_engines();
  RouterInstance router(choice, engines, host);
  ASSERT_TRUE(router.reads_kv_events());
  const std::vector<hw_kv_event> stored = {{11, HW_KV_EVENT_STORED, 0}};
  EXPECT_THROW(router.kv_events(0, {}), Error);      // the announcement fails
  EXPECT_THROW(router.kv_events(0, stored), Error);  // announced again; these events fail
  EXPECT_EQ(host.counters().at("kv_events_announced"), 1.0);
  router.kv_events(0, stored);  // ALL_REMOVED first
  router.kv_events(1, {});
  router.kv_events(1, stored);
  const std::map<std::string, double> counters = host.counters();
  EXPECT_EQ(counters.at("kv_events_announced"), 2.0);
  EXPECT_EQ(counters.at("kv_all_removed"), 1.0);
  EXPECT_EQ(counters.at("kv_pieces_stored"), 2.0);
  EXPECT_EQ(counters.at("kv_events_engine_0"), 2.0);  // ALL_REMOVED and the piece
}

// A raw C table (the SDK's adapter cannot do this) whose peer_rendezvous says it wrote one byte
// more than it was given room for.
namespace overlong_rendezvous {
int handle_storage = 0;
int32_t create(const hw_host_services*, const hw_options*, hw_kv_transport** out, hw_status*) {
  *out = reinterpret_cast<hw_kv_transport*>(&handle_storage);
  return HW_OK;
}
void destroy(hw_kv_transport*) {}
int32_t start(hw_kv_transport*, const hw_kv_transfer*, uint64_t*, hw_status*) {
  return HW_UNIMPLEMENTED;
}
int32_t poll(hw_kv_transport*, uint64_t, int32_t*, double*, hw_status*) { return HW_UNIMPLEMENTED; }
int32_t rendezvous(hw_kv_transport*, uint8_t* id, uint64_t capacity, uint64_t* size, hw_status*) {
  std::fill(id, id + capacity, uint8_t{7});
  *size = capacity + 1;
  return HW_OK;
}
int32_t join(hw_kv_transport*, const uint8_t*, uint64_t, int32_t, int32_t, int32_t, uint64_t*,
             hw_status*) {
  return HW_UNIMPLEMENTED;
}
int32_t state(hw_kv_transport*, uint64_t, int32_t*, hw_status*) { return HW_UNIMPLEMENTED; }
int32_t post(hw_kv_transport*, uint64_t, int32_t, const hw_memory_desc*, const uint32_t*, uint32_t,
             uint64_t*, hw_status*) {
  return HW_UNIMPLEMENTED;
}
void close(hw_kv_transport*, uint64_t) {}
const hw_kv_transport_table table{sizeof(hw_kv_transport_table),
                                  create,
                                  destroy,
                                  start,
                                  poll,
                                  rendezvous,
                                  join,
                                  state,
                                  post,
                                  close};
const hw_plugin_descriptor descriptor{
    sizeof(hw_plugin_descriptor),
    HW_ABI_MAJOR,
    HW_ABI_MINOR,
    HW_KIND_KV_TRANSPORT,
    HW_STR_LITERAL("org.headway.test.overlong_rendezvous"),
    HW_STR_LITERAL("overlong_rendezvous"),
    HW_STR_LITERAL("0.0.1"),
    HW_STR_LITERAL("says it wrote more than it was given room for"),
    nullptr,
    0,
    &table};
}  // namespace overlong_rendezvous

// From helper-202's review: the host cut such an id to its room and handed the peer a shortened
// one, which then failed far from its cause. Refused, naming the transport.
TEST(PluginRegistry, ARendezvousIdLongerThanItsRoomIsABrokenContract) {
  LoadedPlugin plugin;
  plugin.descriptor = &overlong_rendezvous::descriptor;
  const PluginChoice choice = choice_of(plugin, "test: kv_transport");
  VirtualClock clock;
  HostServices host("kv_transport overlong_rendezvous", &clock);
  KvTransportInstance transport(choice, host);
  try {
    transport.peer_rendezvous();
    ADD_FAILURE() << "no error";
  } catch (const PluginContractError& e) {
    EXPECT_THAT(e.what(), HasSubstr("KV transport 'overlong_rendezvous' peer_rendezvous: says it "
                                    "wrote 257 bytes, more than the 256"));
  }
}

TEST(PluginRegistry, RefusesATableWithoutAMandatoryFunction) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_missing_function");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("mandatory function 'schedule'"));
  EXPECT_THAT(e.what(), HasSubstr("step scheduler"));
}

TEST(PluginRegistry, RefusesADescriptorThatIsTooSmall) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_small_descriptor");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("descriptor struct_size " +
                                  std::to_string(offsetof(hw_plugin_descriptor, table))));
  EXPECT_THAT(e.what(), HasSubstr(std::to_string(sizeof(hw_plugin_descriptor))));
}

TEST(PluginRegistry, RefusesADescriptorStringWithAGarbageSize) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_huge_description");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("refused: the descriptor's description is " +
                                  std::to_string(uint64_t{1} << 62) + " bytes long"));
  EXPECT_THAT(e.what(), HasSubstr("at most 65536"));
}

// Pointers into nothing are found before the host reads through them: the process used to die
// with SIGSEGV while loading plugins.
TEST(PluginRegistry, RefusesADescriptorPointerIntoUnmappedMemory) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_garbage_descriptor");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(),
              HasSubstr("refused: the descriptor headway_plugin_entry() returned (0x1000"));
  EXPECT_THAT(e.what(), HasSubstr("is not readable memory"));
}

TEST(PluginRegistry, RefusesADescriptorStringPointingIntoUnmappedMemory) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_garbage_string");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(),
              HasSubstr("refused: the descriptor's version points to memory that cannot be read "
                        "(0x1000)"));
}

TEST(PluginRegistry, RefusesALibraryThatIsNotAPlugin) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_not_a_plugin");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("not a Headway plugin"));
  EXPECT_THAT(e.what(), HasSubstr("headway_plugin_entry"));
  EXPECT_THAT(e.what(), testing::Not(HasSubstr("mangled")));
}

TEST(PluginRegistry, AnUndefinedSymbolIsNamedReadablyWithoutBoostsNoise) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_undefined_symbol");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("undefined symbol"));
  EXPECT_THAT(e.what(), HasSubstr("helper_from_a_missing_library(int)"));
  EXPECT_THAT(e.what(), testing::Not(HasSubstr("boost::")));
  EXPECT_THAT(e.what(), testing::Not(HasSubstr("Bad file descriptor")));
}

TEST(PluginRegistry, AnEntryWithoutExternCIsNamedAsSuch) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_mangled_entry");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("C++-mangled headway_plugin_entry()"));
  EXPECT_THAT(e.what(), HasSubstr("extern \"C\""));
}

// An exported variable of the entry's name: calling it would crash the host (and `plugin list` of
// a directory holding it), so it is refused by its symbol type.
TEST(PluginRegistry, AnEntryThatIsNotAFunctionIsRefusedWithoutCrashing) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_data_entry");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("headway_plugin_entry is not a function"));
}

// An entry that throws: the message named nothing ("internal error: <its text>").
TEST(PluginRegistry, AnEntryThatThrowsIsNamedWithItsFile) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_throwing_entry");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("an exception escaped its headway_plugin_entry()"));
  EXPECT_THAT(e.what(), HasSubstr("test_throwing_entry: thrown from the entry"));
}

// A plugin half-copied into a plugin directory: dlopen would kill the process with SIGBUS, so the
// registry must refuse it first, by path and in a directory scan, and load the others.
TEST(PluginRegistry, RefusesATruncatedOrNonElfFileWithoutCrashing) {
  const fs::path dir =
      fs::temp_directory_path() / ("headway_truncated_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path good = test_plugin("test_good_scheduler");
  const uint64_t size = fs::file_size(good);
  fs::copy_file(good, dir / "whole.so");
  for (const auto& [name, bytes] : {std::pair{"half.so", size / 2}, std::pair{"most.so", size - 64},
                                    std::pair{"header_only.so", uint64_t{64}}}) {
    fs::copy_file(good, dir / name);
    fs::resize_file(dir / name, bytes);
  }
  { std::ofstream(dir / "junk.so") << "not a shared object at all"; }

  PluginRegistry registry;
  for (const char* name : {"half.so", "most.so", "header_only.so"}) {
    Error e = expect_error([&] { registry.load_path(dir / name); });
    EXPECT_THAT(e.what(), AllOf(HasSubstr(name), HasSubstr("truncated"))) << name;
  }
  EXPECT_THAT(expect_error([&] { registry.load_path(dir / "junk.so"); }).what(),
              HasSubstr("not an ELF file"));
  // Not files at all: said so (the size check said "Operation not supported" of a device).
  EXPECT_THAT(expect_error([&] { registry.load_path("/dev/zero"); }).what(),
              AllOf(HasSubstr("/dev/zero"), HasSubstr("not a regular file")));
  EXPECT_THAT(expect_error([&] { registry.load_path(dir); }).what(),
              HasSubstr("a directory, not a file"));
  registry.add_search_directory(dir);
  std::vector<std::string> names;
  for (const LoadedPlugin* p : registry.discover()) names.push_back(p->short_name());
  EXPECT_THAT(names, ::testing::Contains("test_good")) << "the whole copy still loads";
  fs::remove_all(dir);
}

TEST(PluginRegistry, RefusesABadOptionSchema) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_bad_schema");
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("enum option 'mode'"));
  EXPECT_THAT(e.what(), HasSubstr("default 'medium' outside its allowed values"));
}

// Schemas that lie were loaded, and then made an option no file could set (a duplicate key, one
// that is not a TOML key) or a range nothing satisfies: refused at load, naming the option.
TEST(PluginRegistry, RefusesAnOptionSchemaThatLies) {
  const std::pair<const char*, const char*> cases[] = {
      {"duplicate_key", "options #0 and #1 are both named 'n'"},
      {"bool_default_7", "bool option 'flag' has default 7"},
      {"fractional_int_bound", "integer option 'count' has minimum 0.5, not an integer"},
      {"min_above_max", "option 'depth' has minimum 10 above its maximum 1"},
      // Compared as doubles, 2^62 + 1 was 2^62 and passed (helper-205's review).
      {"int_default_past_max", "option 'seed' has default 4611686018427387905 outside its range"},
  };
  for (const auto& [way, message] : cases) {
    PluginRegistry registry;
    const fs::path file = test_plugin(std::string("test_lying_schema_") + way);
    Error e = expect_error([&] { registry.load_path(file); });
    EXPECT_THAT(e.what(), HasSubstr(file.string())) << way;
    EXPECT_THAT(e.what(), HasSubstr(message)) << way;
  }
}

// A key that is not a TOML bare key is one a deployment file writes quoted: the template that
// `plugin describe` prints quotes it (it printed `a b.c = 1`, which is no TOML), and so does the
// file that sets it.
TEST(PluginRegistry, AnOptionKeyThatNeedsQuotesIsQuotedInTheTemplate) {
  PluginRegistry registry;
  const LoadedPlugin& plugin = registry.load_path(test_plugin("test_lying_schema_quoted_key"));
  const std::string text = options_template(*plugin.descriptor, "scheduler.options");
  EXPECT_THAT(text, HasSubstr("\n\"a b.c\" = 1\n")) << text;
  const toml::table table = toml::parse(std::string_view("\"a b.c\" = 3"));
  const PluginOptions set = PluginOptions::from_toml(*plugin.descriptor, &table, "t.toml: opts");
  ASSERT_EQ(set.view()->count, 2u);
  EXPECT_EQ(set.view()->values[1].int_value, 3);
}

TEST(PluginRegistry, RefusedPluginsAreRefusedAgainOnTheSecondTry) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_abi_major");
  expect_error([&] { registry.load_path(file); });
  Error e = expect_error([&] { registry.load_path(file); });
  EXPECT_THAT(e.what(), HasSubstr("refused"));
}

TEST(PluginRegistry, NonexistentPath) {
  PluginRegistry registry;
  Error e = expect_error([&] { registry.load_path("/nonexistent/dir/nothing.so"); });
  EXPECT_EQ(e.code(), HW_NOT_FOUND);
  EXPECT_THAT(e.what(), HasSubstr("/nonexistent/dir/nothing.so"));
  EXPECT_THAT(e.what(), HasSubstr("no such file"));
  // Same through find(): a name with a slash is a path.
  Error f = expect_error([&] { registry.find("/nonexistent/dir/nothing.so", HW_KIND_MODEL); });
  EXPECT_EQ(f.code(), HW_NOT_FOUND);
}

TEST(PluginRegistry, FindByPathWithTheWrongKind) {
  PluginRegistry registry;
  const fs::path file = test_plugin("test_good_scheduler");
  Error e = expect_error([&] { registry.find(file.string(), HW_KIND_MODEL); });
  EXPECT_THAT(e.what(), HasSubstr(file.string()));
  EXPECT_THAT(e.what(), HasSubstr("is a step scheduler, but a model was expected"));
}

TEST(PluginRegistry, FindByNameWithTheWrongKind) {
  PluginRegistry registry;
  registry.add_search_directory(kTestPlugins);
  Error e = expect_error([&] { registry.find("test_good", HW_KIND_ROUTER); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("'test_good' is a step scheduler, but a router was expected"));
}

TEST(PluginRegistry, UnknownNameListsAvailablePluginsAndSearchedDirectories) {
  PluginRegistry registry;
  registry.add_search_directory(kTestPlugins);
  registry.add_search_directory("/nonexistent/plugins");
  Error e = expect_error([&] { registry.find("no_such_scheduler", HW_KIND_STEP_SCHEDULER); });
  EXPECT_EQ(e.code(), HW_NOT_FOUND);
  const std::string message = e.what();
  EXPECT_THAT(message, HasSubstr("unknown step scheduler plugin 'no_such_scheduler'"));
  EXPECT_THAT(message, HasSubstr("available: "));
  EXPECT_THAT(message, HasSubstr("test_good"));
  EXPECT_THAT(message, HasSubstr("test_throwing"));
  EXPECT_THAT(message, Not(HasSubstr("test_abi_major")));  // refused ones are not offered
  EXPECT_THAT(message, HasSubstr("searched: /nonexistent/plugins, " + kTestPlugins.string()));
}

// Headway's GPU plugins: where the build has them (nvcc found) they are found by their short
// names; where it has not, the error says they are built only with nvcc. (CI's build has them; the
// CPU-only builds, e.g. scripts/tsan.sh's, take the second branch.)
TEST(PluginRegistry, AMissingGpuPluginSaysItIsBuiltOnlyWithNvcc) {
  PluginRegistry registry;
  registry.add_search_directory(kTestPlugins);
  const std::pair<const char*, const char*> gpu_plugins[] = {
      {"cuda", "org.headway.model.cuda"}, {"nccl", "org.headway.kv_transport.nccl"}};
  for (const auto& [name, full_name] : gpu_plugins) {
    try {
      EXPECT_EQ(registry.find(name, 0).name(), full_name);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), HW_NOT_FOUND) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("built only where CMake finds nvcc")) << name;
    }
  }
  Error other = expect_error([&] { registry.find("no_such_model", HW_KIND_MODEL); });
  EXPECT_THAT(other.what(), Not(HasSubstr("nvcc")));
}

TEST(PluginRegistry, RefusedPluginsCannotBeFoundByName) {
  PluginRegistry registry;
  registry.add_search_directory(kTestPlugins);
  Error e = expect_error([&] { registry.find("test_abi_minor", HW_KIND_STEP_SCHEDULER); });
  EXPECT_EQ(e.code(), HW_NOT_FOUND);
  EXPECT_THAT(e.what(), HasSubstr("unknown step scheduler plugin 'test_abi_minor'"));
}

TEST(PluginRegistry, KindNames) {
  EXPECT_EQ(kind_name(HW_KIND_STEP_SCHEDULER), "step scheduler");
  EXPECT_EQ(kind_name(HW_KIND_ROUTER), "router");
  EXPECT_EQ(kind_name(HW_KIND_KV_TRANSPORT), "KV transport");
  EXPECT_EQ(kind_name(HW_KIND_MODEL), "model");
}

// ---- The SDK's exception firewall, seen from the host ----------------------------------------

class ExceptionFirewall : public ::testing::Test {
 protected:
  void SetUp() override { plugin_ = &registry_.load_path(test_plugin("test_throwing_scheduler")); }

  // Calls create() with mode = `mode`; returns the code, fills status_ and handle_.
  int32_t create(const std::string& mode) {
    toml::table options;
    options.insert("mode", mode);
    options_ = std::make_unique<PluginOptions>(
        PluginOptions::from_toml(*plugin_->descriptor, &options, "test.options"));
    std::memset(&status_, 0, sizeof(status_));
    handle_ = nullptr;
    const hw_engine_facts facts{sizeof(hw_engine_facts), 16, 1024, 4096};
    return plugin_->table<hw_scheduler_table>().create(nullptr, options_->view(), &facts, &handle_,
                                                       &status_);
  }

  PluginRegistry registry_;
  const LoadedPlugin* plugin_ = nullptr;
  std::unique_ptr<PluginOptions> options_;
  hw_status status_{};
  hw_scheduler* handle_ = nullptr;
};

TEST_F(ExceptionFirewall, StdExceptionBecomesInternalWithItsMessage) {
  EXPECT_EQ(create("runtime_error"), HW_INTERNAL);
  EXPECT_EQ(status_.code, HW_INTERNAL);
  EXPECT_STREQ(status_.message, "test_throwing_scheduler: create failed on purpose");
  EXPECT_EQ(handle_, nullptr);
}

TEST_F(ExceptionFirewall, SdkErrorKeepsItsCode) {
  EXPECT_EQ(create("sdk_error"), HW_RESOURCE_EXHAUSTED);
  EXPECT_EQ(status_.code, HW_RESOURCE_EXHAUSTED);
  EXPECT_STREQ(status_.message, "test_throwing_scheduler: out of widgets");
}

TEST_F(ExceptionFirewall, NonStdExceptionBecomesInternal) {
  EXPECT_EQ(create("int"), HW_INTERNAL);
  EXPECT_EQ(status_.code, HW_INTERNAL);
  EXPECT_STREQ(status_.message, "unknown exception in plugin");
}

TEST_F(ExceptionFirewall, ScheduleExceptionBecomesAStatus) {
  ASSERT_EQ(create("none"), HW_OK);
  ASSERT_NE(handle_, nullptr);
  const auto& table = plugin_->table<hw_scheduler_table>();
  hw_scheduler_snapshot snapshot{};
  snapshot.struct_size = sizeof(snapshot);
  hw_slice slices[1];
  uint64_t preempted[1];
  hw_scheduler_plan plan{sizeof(hw_scheduler_plan), slices, 1, 0, preempted, 1, 0};
  hw_status status{};
  EXPECT_EQ(table.schedule(handle_, &snapshot, &plan, &status), HW_INTERNAL);
  EXPECT_STREQ(status.message, "test_throwing_scheduler: schedule failed on purpose");
  table.destroy(handle_);
}

TEST_F(ExceptionFirewall, HostWrapperTurnsTheStatusIntoAnError) {
  const PluginChoice choice = choice_of(*plugin_, "deploy.toml: engines[0].scheduler");
  VirtualClock clock;
  HostServices host("engine0/test_throwing", &clock);
  const hw_engine_facts facts{sizeof(hw_engine_facts), 16, 1024, 4096};
  Error e = expect_error([&] { SchedulerInstance instance(choice, facts, host); });
  EXPECT_EQ(e.code(), HW_INTERNAL);
  EXPECT_THAT(e.what(), HasSubstr("deploy.toml: engines[0].scheduler"));
  EXPECT_THAT(e.what(), HasSubstr("test_throwing"));
  EXPECT_THAT(e.what(), HasSubstr("test_throwing_scheduler: create failed on purpose"));
}

TEST(PluginRegistryInstances, AnExceptionThroughARawCTableBecomesAnErrorNamingTheCall) {
  PluginRegistry registry;
  const LoadedPlugin& plugin = registry.load_path(test_plugin("test_raw_throwing_scheduler"));
  const PluginChoice choice = choice_of(plugin, "test: scheduler");
  VirtualClock clock;
  HostServices host("engine0/test_raw_throwing", &clock);
  const hw_engine_facts facts{sizeof(hw_engine_facts), 16, 1024, 4096};
  SchedulerInstance instance(choice, facts, host);
  hw_scheduler_snapshot snapshot{};
  hw_slice slices[1];
  uint64_t preempted[1];
  hw_scheduler_plan plan{sizeof(hw_scheduler_plan), slices, 1, 0, preempted, 1, 0};
  Error e = expect_error([&] { instance.schedule(snapshot, plan); });
  EXPECT_EQ(e.code(), HW_INTERNAL);
  EXPECT_THAT(e.what(), HasSubstr("scheduler 'test_raw_throwing' schedule"));
  EXPECT_THAT(e.what(), HasSubstr("escaped the plugin's C ABI"));
  EXPECT_THAT(e.what(), HasSubstr("thrown through the C ABI"));
}

TEST(PluginRegistryInstances, GoodSchedulerSeesItsOptions) {
  PluginRegistry registry;
  const LoadedPlugin& plugin = registry.load_path(test_plugin("test_good_scheduler"));
  auto parsed = toml::parse("max_num_seqs = 33\nbudget = 1000\n");
  const PluginChoice choice = choice_of(plugin, "test: scheduler", &parsed);
  VirtualClock clock;
  HostServices host("engine0/test_good", &clock);
  const hw_engine_facts facts{sizeof(hw_engine_facts), 16, 1024, 4096};
  SchedulerInstance instance(choice, facts, host);
  EXPECT_EQ(instance.limits().max_num_seqs, 33u);
  EXPECT_EQ(instance.limits().max_num_batched_tokens, 1000u);
  EXPECT_EQ(instance.name(), "test_good");
}

}  // namespace
}  // namespace headway::core
