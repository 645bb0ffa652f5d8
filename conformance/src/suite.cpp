// Profile dispatch: which profile a kind gets, and marking core tests from the mustpass list.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <headway/conformance/suite.h>
#include <headway/core/error.h>

#include <algorithm>

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

std::string mustpass_name(const std::string& profile) { return profile + "-v1"; }

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

ProfileResult run_profile(const SuiteContext& context, const std::string& profile) {
  const ProfileEntry* entry = nullptr;
  for (const ProfileEntry& p : kProfiles) {
    if (profile == p.name) entry = &p;
  }
  if (entry == nullptr) {
    std::string known;
    for (const std::string& n : profile_names()) known += (known.empty() ? "" : ", ") + n;
    throw core::Error("unknown profile '" + profile + "' (known: " + known + ")");
  }
  const int32_t kind = context.plugin.plugin->kind();
  if (kind != entry->kind) {
    throw core::Error("profile '" + profile + "' is for " +
                      std::string(core::kind_name(entry->kind)) + " plugins; '" +
                      context.plugin.plugin->name() + "' is a " +
                      std::string(core::kind_name(kind)));
  }
  ProfileResult result;
  result.profile = profile;
  result.mustpass = mustpass_name(profile);
  result.tests = entry->run(context);
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

}  // namespace headway::conformance
