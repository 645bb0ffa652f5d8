// Test support: runs a conformance profile in-process on a plugin file, through one registry that
// also searches the in-tree plugin directory (for the simulated model the scheduler profile needs).
#pragma once

#include <headway/conformance/suite.h>

#include <algorithm>
#include <string>

namespace headway::test {

inline core::PluginRegistry& conformance_registry() {
  static core::PluginRegistry registry;
  static bool init = [] {
    registry.add_search_directory(HEADWAY_PLUGIN_DIR);
    return true;
  }();
  (void)init;
  return registry;
}

inline conformance::ProfileResult run_suite(const std::string& path,
                                            const std::string& options = "",
                                            std::set<std::string> features = {},
                                            const std::string& mustpass = "") {
  conformance::SuiteContext context;
  context.options.plugin = path;
  context.options.options = options;
  context.options.features = std::move(features);
  context.options.mustpass = mustpass;
#ifdef HEADWAY_CONFORMANCE_CLI
  // What headway-conformance sets to itself: scheduler.same_across_processes runs it again.
  context.suite_executable = HEADWAY_CONFORMANCE_CLI;
#endif
  context.plugin.registry = &conformance_registry();
  context.plugin.plugin = &context.plugin.registry->load_path(path);
  context.plugin.options_text = options;
  context.plugin.options = conformance::parse_options(*context.plugin.plugin->descriptor, options);
  return conformance::run_profile(context,
                                  conformance::default_profile(context.plugin.plugin->kind()));
}

inline const conformance::TestResult* find_test(const conformance::ProfileResult& r,
                                                const std::string& id) {
  auto it = std::find_if(r.tests.begin(), r.tests.end(),
                         [&](const conformance::TestResult& t) { return t.id == id; });
  return it == r.tests.end() ? nullptr : &*it;
}

// Every result as one line each, for failure messages.
inline std::string describe(const conformance::ProfileResult& r) {
  std::string text = r.summary_line() + "\n";
  for (const conformance::TestResult& t : r.tests) {
    text +=
        std::string(conformance::outcome_name(t.outcome)) + " " + t.id + ": " + t.message + "\n";
  }
  return text;
}

}  // namespace headway::test
