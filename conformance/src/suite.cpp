// Profile dispatch: which profile a kind gets, and marking core tests from the mustpass list.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <headway/conformance/suite.h>
#include <headway/core/error.h>

#include <algorithm>
#include <chrono>

namespace headway::conformance {
namespace {

struct ProfileEntry {
  const char* name;
  int32_t kind;
  std::vector<TestResult> (*run)(const SuiteContext&);
};

const ProfileEntry kProfiles[] = {
    {"step-scheduler-core", HW_KIND_STEP_SCHEDULER, &run_step_scheduler_profile},
    {"router-core", HW_KIND_ROUTER, &run_router_profile},
    {"kv-transport-core", HW_KIND_KV_TRANSPORT, &run_kv_transport_profile},
    {"model-core", HW_KIND_MODEL, &run_model_profile},
};

}  // namespace

std::string default_profile(int32_t kind) {
  for (const ProfileEntry& p : kProfiles) {
    if (p.kind == kind) return p.name;
  }
  throw core::Error("no conformance profile for plugin kind " + std::to_string(kind));
}

std::vector<std::string> profile_names() {
  std::vector<std::string> names;
  for (const ProfileEntry& p : kProfiles) names.emplace_back(p.name);
  return names;
}

namespace {

// The profile's lists in version order: a new version adds core tests, the older ones stay as
// they were (a plugin conformant to model-core-v1 still is, and says so against v1).
std::vector<std::string> mustpass_lists(const std::string& profile) {
  std::vector<std::string> lists = {profile + "-v1"};
  for (int version = 2; !mustpass_tests(profile + "-v" + std::to_string(version)).empty();
       ++version) {
    lists.push_back(profile + "-v" + std::to_string(version));
  }
  return lists;
}

}  // namespace

std::string mustpass_name(const std::string& profile) { return mustpass_lists(profile).back(); }

std::string mustpass_for(const SuiteOptions& options, const std::string& profile) {
  if (options.mustpass.empty()) return mustpass_name(profile);
  const std::vector<std::string> lists = mustpass_lists(profile);
  if (std::find(lists.begin(), lists.end(), options.mustpass) == lists.end()) {
    throw core::Error(fmt::format("--mustpass: '{}' is not a list of profile {} (there are: {})",
                                  options.mustpass, profile, fmt::join(lists, ", ")));
  }
  return options.mustpass;
}

std::vector<std::string> known_features(int32_t kind) {
  if (kind == HW_KIND_ROUTER) return {"pools", "disaggregation"};
  return {};
}

void check_features(int32_t kind, const std::set<std::string>& declared) {
  const std::vector<std::string> known = known_features(kind);
  for (const std::string& feature : declared) {
    if (std::find(known.begin(), known.end(), feature) != known.end()) continue;
    throw core::Error(fmt::format(
        "--features: '{}' is not a feature of a {} (known: {})", feature, core::kind_name(kind),
        known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
  }
}

namespace {

const ProfileEntry& find_profile(const std::string& profile, int32_t kind,
                                 const std::string& plugin_name) {
  const ProfileEntry* entry = nullptr;
  for (const ProfileEntry& p : kProfiles) {
    if (profile == p.name) entry = &p;
  }
  if (entry == nullptr) {
    throw core::Error(fmt::format("--profile: unknown profile '{}' (known: {})", profile,
                                  fmt::join(profile_names(), ", ")));
  }
  if (kind != entry->kind) {
    throw core::Error(fmt::format("--profile: '{}' is for {} plugins; '{}' is a {}", profile,
                                  core::kind_name(entry->kind), plugin_name,
                                  core::kind_name(kind)));
  }
  return *entry;
}

}  // namespace

void check_profile(const std::string& profile, const core::LoadedPlugin& plugin) {
  (void)find_profile(profile, plugin.kind(), plugin.name());
}

void throw_if_options_refused(const PluginUnderTest& p, const core::Error& e) {
  if (e.code() != HW_INVALID_ARGUMENT) return;
  const std::string given =
      p.options_text.empty() ? "none" : fmt::format("--options '{}'", p.options_text);
  throw core::Error(fmt::format(
      "'{}' refused the options given ({}) when the suite set it up: {}; give the options it "
      "needs with --options 'key = value, ...' (`headway plugin describe {}` lists them)",
      p.plugin->short_name(), given, e.what(), p.plugin->path.string()));
}

ProfileResult run_profile(const SuiteContext& context, const std::string& profile) {
  const ProfileEntry& entry =
      find_profile(profile, context.plugin.plugin->kind(), context.plugin.plugin->name());
  ProfileResult result;
  result.profile = profile;
  result.mustpass = mustpass_for(context.options, profile);
  const auto start = std::chrono::steady_clock::now();
  result.tests = entry.run(context);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<std::string> core_ids = mustpass_tests(result.mustpass);
  for (TestResult& t : result.tests) {
    t.core = std::find(core_ids.begin(), core_ids.end(), t.id) != core_ids.end();
  }
  for (const std::string& id : core_ids) {
    const bool ran = std::any_of(result.tests.begin(), result.tests.end(),
                                 [&](const TestResult& t) { return t.id == id; });
    if (!ran) result.missing_core.push_back(id);
  }
  return result;
}

nlohmann::json replay(const SuiteContext& context, const std::string& what) {
  struct Replay {
    const char* name;
    int32_t kind;
    nlohmann::json (*compute)(const SuiteContext&);
  };
  static constexpr Replay kReplays[] = {
      {"scheduler-plans", HW_KIND_STEP_SCHEDULER, scheduler_plan_hashes},
      {"router-placements", HW_KIND_ROUTER, router_placement_keys},
  };
  for (const Replay& r : kReplays) {
    if (what != r.name) continue;
    const int32_t kind = context.plugin.plugin->kind();
    if (kind != r.kind) {
      throw core::Error(fmt::format("--replay {}: '{}' is a {}, not a {}", what,
                                    context.plugin.plugin->name(), core::kind_name(kind),
                                    core::kind_name(r.kind)));
    }
    return r.compute(context);
  }
  throw core::Error(
      fmt::format("--replay: unknown '{}' (known: scheduler-plans, router-placements)", what));
}

}  // namespace headway::conformance
