// What each engine of a simulated deployment ran (its model plugin and options) and did: how busy
// it was, its steps, the prompt and output tokens it computed, the requests whose output it
// produced, its preemptions. A deployment's figures pool every engine, so they cannot show one
// engine idle beside another overloaded (a conditional disaggregation that kept every prompt on
// its decode engine left the prefill engine idle, and only its goodput said something was off).
//
// Threading: pure functions of their arguments.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "headway/core/deployment_config.h"
#include "headway/core/simulator.h"

namespace headway::core {

struct EngineUsage {
  std::string name;  // EngineConfig::name
  std::string role;  // "mixed", "prefill" or "decode"
  std::string pool;  // the length router's pool; "" without one
  // busy_seconds over the run's simulated seconds (first arrival to last event); 0 for a run of
  // no time.
  double busy_fraction = 0;
  uint64_t steps = 0;
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
  uint64_t requests = 0;  // requests whose output tokens this engine produced
  uint64_t preemptions = 0;
  // Tokens of KV moved to it that its prefix cache held already (not copied).
  uint64_t moved_kv_cached_tokens = 0;
  // The model plugin it ran (short name), its options as they took effect (defaults included),
  // and options_summary_text() of them: a report must say which model, GPU and parallelism it
  // simulated, also when the file left them to the defaults.
  std::string model;
  std::shared_ptr<const PluginOptions> model_options;  // the deployment's; null: none
  std::string model_options_summary;
};

// One entry per engine of `deployment`, in its order. Throws Error when `run` does not hold one
// counter set per engine (a result of another deployment).
std::vector<EngineUsage> engine_usage(const DeploymentConfig& deployment,
                                      const SimulationResult& run);

// A table, one line per engine, with a header line.
void print_engine_usage(std::ostream& out, const std::vector<EngineUsage>& engines);

// "model: sim (gpu = \"h100\", tensor_parallel = 4; other options at their defaults)", the
// engines named when they differ ("…; on engine2: sim (…)"), and a newline.
void print_engine_models(std::ostream& out, const std::vector<EngineUsage>& engines);

nlohmann::json engine_usage_to_json(const std::vector<EngineUsage>& engines);

}  // namespace headway::core
