// The conformance suite's entry point: the plugin under test, how to run it, and the profiles.
//
// Ownership: a PluginUnderTest borrows its LoadedPlugin from the registry (which never unloads) and
// shares ownership of its validated options. Threading: a suite run is single-threaded except where
// a test starts its own threads (concurrent KV transfers).
#pragma once

#include <headway/abi.h>
#include <headway/conformance/result.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/plugin_registry.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace headway::conformance {

struct SuiteOptions {
  std::filesystem::path plugin;
  std::string profile;             // empty: the core profile of the plugin's kind
  std::set<std::string> features;  // optional features the plugin declares (e.g. "pools")
  std::string options;             // the plugin's options as a TOML inline-table body
  uint64_t seed = 1;
  std::filesystem::path config_dir = ".";  // where a model resolves relative option paths
  std::string mustpass;                    // the list judged against; empty: the profile's newest
};

struct PluginUnderTest {
  const core::LoadedPlugin* plugin = nullptr;
  std::shared_ptr<const core::PluginOptions> options;
  std::string options_text;  // as given, for re-validation with changed keys
  core::PluginRegistry* registry = nullptr;

  // A PluginChoice with the options as given.
  core::PluginChoice choice() const;
  // A PluginChoice with some keys overridden (TOML inline-table body, e.g. "max_num_seqs = 8");
  // keys given by the user win over these. Throws core::Error when the result is invalid.
  core::PluginChoice choice_with(const std::string& defaults) const;
  // True when the plugin's schema has an option of this key and type.
  bool has_option(std::string_view key, int32_t type) const;
  // True when the user set this key in --options.
  bool user_set(std::string_view key) const;
};

// Parses `key = value, …` (the body of a TOML inline table) and validates it against the plugin's
// schema with core::PluginOptions. Throws core::Error naming the key on any problem.
std::shared_ptr<const core::PluginOptions> parse_options(const hw_plugin_descriptor& descriptor,
                                                         const std::string& text);

// "step-scheduler-core", "router-core", "kv-transport-core", "model-core".
std::string default_profile(int32_t kind);
std::vector<std::string> profile_names();
// The optional features the profile of `kind` tests when declared (routers: "pools",
// "disaggregation"; the other kinds have none). Throws core::Error naming any of `declared` that
// is not one of them, so that a misspelt --features does not quietly test less.
std::vector<std::string> known_features(int32_t kind);
void check_features(int32_t kind, const std::set<std::string>& declared);

struct SuiteContext {
  PluginUnderTest plugin;
  SuiteOptions options;
  // headway-conformance's own file, which a test runs again as another process to compare what it
  // computes there (replay()); empty: those comparisons are skipped, saying so.
  std::filesystem::path suite_executable;
  bool has_feature(const std::string& name) const { return options.features.count(name) != 0; }
};

// Runs one profile and marks core tests from its mustpass list. Throws core::Error on an unknown
// profile or one that does not match the plugin's kind (check_profile() says so up front), and
// when the plugin refused the options it was given (throw_if_options_refused()).
ProfileResult run_profile(const SuiteContext& context, const std::string& profile);
void check_profile(const std::string& profile, const core::LoadedPlugin& plugin);

// What `headway-conformance --replay WHAT` computes and prints, in the process that runs it:
// "scheduler-plans", the step hashes of the scheduler profile's replayed traces, and
// "router-placements", the router profile's placements (each kind's same_across_processes test
// compares them with its own). Throws core::Error for another WHAT, or one that does not fit the
// plugin's kind.
nlohmann::json replay(const SuiteContext& context, const std::string& what);

// For a profile's first create() of the plugin: a failure with HW_INVALID_ARGUMENT means the
// plugin refused the options it was given (a model without its checkpoint path), so the run could
// say nothing about its conformance. Throws core::Error saying so (the command's usage error, exit
// 2, not a FAIL); returns for any other failure, which the profile reports as a test's FAIL.
void throw_if_options_refused(const PluginUnderTest& plugin, const core::Error& e);

// The profiles themselves (one per kind); each returns its results in a stable order.
std::vector<TestResult> run_step_scheduler_profile(const SuiteContext& context);
std::vector<TestResult> run_router_profile(const SuiteContext& context);
std::vector<TestResult> run_kv_transport_profile(const SuiteContext& context);
std::vector<TestResult> run_model_profile(const SuiteContext& context);
// For replay("scheduler-plans"): {"traces": [{"name", "hashes": [one per step]}]} of the traces
// scheduler.deterministic replays, each planned once.
nlohmann::json scheduler_plan_hashes(const SuiteContext& context);
// For replay("router-placements"): {"shapes": [{"name", "keys": [one per request] or null where
// create() refused the shape}]} of router.deterministic's requests, as its first instance placed
// them.
nlohmann::json router_placement_keys(const SuiteContext& context);

// The core test ids of a versioned mustpass list ("step-scheduler-core-v1"), compiled in from
// conformance/mustpass/. Empty when unknown.
std::vector<std::string> mustpass_tests(const std::string& list_name);
std::string mustpass_name(const std::string& profile);  // the newest: "<profile>-v2"
// The list `options` asks for (checked to be one of `profile`'s, else core::Error naming those
// there are), or the newest.
std::string mustpass_for(const SuiteOptions& options, const std::string& profile);

}  // namespace headway::conformance
