#include "headway/core/engine_usage.h"

#include <fmt/format.h>

#include <algorithm>

#include "headway/core/engine_role.h"
#include "headway/core/error.h"
#include "headway/core/option_values.h"

namespace headway::core {

std::vector<EngineUsage> engine_usage(const DeploymentConfig& deployment,
                                      const SimulationResult& run) {
  if (run.engines.size() != deployment.engines.size()) {
    throw Error(
        fmt::format("engine usage: the run has counters for {} engines, the deployment {} "
                    "has {}",
                    run.engines.size(), deployment.name, deployment.engines.size()));
  }
  std::vector<EngineUsage> out;
  out.reserve(run.engines.size());
  for (size_t e = 0; e < run.engines.size(); ++e) {
    const EngineConfig& config = deployment.engines[e];
    const EngineCounters& c = run.engines[e];
    EngineUsage u;
    u.name = config.name;
    u.role = engine_role_name(config.role);
    u.pool = config.pool;
    u.busy_fraction = run.simulated_seconds > 0 ? c.busy_seconds / run.simulated_seconds : 0.0;
    u.steps = c.steps;
    u.prefill_tokens = c.prefill_tokens;
    u.decode_tokens = c.decode_tokens;
    u.preemptions = c.preemptions;
    u.moved_kv_cached_tokens = c.moved_kv_cached_tokens;
    const PluginChoice& model = model_of(deployment, config);
    if (model.plugin != nullptr && model.options != nullptr) {
      u.model = model.plugin->short_name();
      u.model_options = model.options;
      u.model_options_summary =
          options_summary_text(*model.plugin->descriptor, *model.options->view());
    }
    out.push_back(std::move(u));
  }
  for (const RequestRecord& r : run.records) {
    if (r.output_tokens > 0 && r.engine < out.size()) ++out[r.engine].requests;
  }
  return out;
}

void print_engine_usage(std::ostream& out, const std::vector<EngineUsage>& engines) {
  size_t width = std::string_view("engine").size();
  for (const EngineUsage& u : engines) width = std::max(width, u.name.size());
  width += 2;
  out << fmt::format("{:<{}}{:<9}{:<10}{:>7}{:>10}{:>15}{:>14}{:>10}{:>10}\n", "engine", width,
                     "role", "pool", "busy", "steps", "prompt tokens", "decode tokens", "requests",
                     "preempts");
  for (const EngineUsage& u : engines) {
    out << fmt::format("{:<{}}{:<9}{:<10}{:>6.1f}%{:>10}{:>15}{:>14}{:>10}{:>10}\n", u.name, width,
                       u.role, u.pool.empty() ? "-" : u.pool, 100.0 * u.busy_fraction, u.steps,
                       u.prefill_tokens, u.decode_tokens, u.requests, u.preemptions);
  }
}

void print_engine_models(std::ostream& out, const std::vector<EngineUsage>& engines) {
  const auto text = [](const EngineUsage& u) {
    return u.model_options_summary.empty()
               ? fmt::format("{} (every option at its default: `headway plugin describe {}`)",
                             u.model, u.model)
               : fmt::format("{} ({}; other options at their defaults)", u.model,
                             u.model_options_summary);
  };
  // One line when every engine runs the same; else each group of engines that does.
  std::vector<std::pair<std::string, std::string>> groups;  // text, engine names
  for (const EngineUsage& u : engines) {
    const std::string t = text(u);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == t; });
    if (it == groups.end()) {
      groups.emplace_back(t, u.name);
    } else {
      it->second += ", " + u.name;
    }
  }
  out << "model: ";
  for (size_t g = 0; g < groups.size(); ++g) {
    out << (g ? "; " : "") << groups[g].first;
    if (groups.size() > 1) out << " on " << groups[g].second;
  }
  out << "\n";
}

nlohmann::json engine_usage_to_json(const std::vector<EngineUsage>& engines) {
  nlohmann::json out = nlohmann::json::array();
  for (const EngineUsage& u : engines) {
    out.push_back(
        {{"name", u.name},
         {"role", u.role},
         {"pool", u.pool},
         {"busy_fraction", u.busy_fraction},
         {"steps", u.steps},
         {"prefill_tokens", u.prefill_tokens},
         {"decode_tokens", u.decode_tokens},
         {"requests", u.requests},
         {"preemptions", u.preemptions},
         {"moved_kv_cached_tokens", u.moved_kv_cached_tokens},
         {"model",
          {{"plugin", u.model},
           {"options", u.model_options != nullptr ? options_to_json(*u.model_options->view())
                                                  : nlohmann::json::object()}}}});
  }
  return out;
}

}  // namespace headway::core
