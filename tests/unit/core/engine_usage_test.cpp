// Per-engine usage of a run, from hand-made counters and records: busy share of the simulated
// time, tokens, the requests each engine produced output for, role and pool names, and a run of
// another deployment refused; and the model each engine ran, from a parsed deployment.
#include "headway/core/engine_usage.h"

#include <gtest/gtest.h>

#include <sstream>

#include "headway/core/error.h"
#include "headway/core/plugin_registry.h"

namespace headway::core {
namespace {

TEST(EngineUsage, ShowsAnIdleEngineBesideABusyOne) {
  DeploymentConfig deployment;
  deployment.name = "pd";
  deployment.engines.resize(2);
  deployment.engines[0].name = "prefill0";
  deployment.engines[0].role = HW_ENGINE_ROLE_PREFILL;
  deployment.engines[1].name = "decode0";
  deployment.engines[1].role = HW_ENGINE_ROLE_DECODE;
  deployment.engines[1].pool = "short";

  SimulationResult run;
  run.simulated_seconds = 10.0;
  run.engines.resize(2);
  run.engines[0].busy_seconds = 0.0;  // every prompt stayed on the decode engine
  run.engines[1].busy_seconds = 7.5;
  run.engines[1].steps = 300;
  run.engines[1].prefill_tokens = 5000;
  run.engines[1].decode_tokens = 900;
  run.engines[1].preemptions = 2;
  for (int i = 0; i < 3; ++i) {
    RequestRecord r;
    r.engine = 1;
    r.output_tokens = i == 2 ? 0 : 10;  // the third produced nothing (refused or cut short)
    run.records.push_back(r);
  }

  const std::vector<EngineUsage> usage = engine_usage(deployment, run);
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].name, "prefill0");
  EXPECT_EQ(usage[0].role, "prefill");
  EXPECT_DOUBLE_EQ(usage[0].busy_fraction, 0.0);
  EXPECT_EQ(usage[0].requests, 0u);
  EXPECT_EQ(usage[1].role, "decode");
  EXPECT_EQ(usage[1].pool, "short");
  EXPECT_DOUBLE_EQ(usage[1].busy_fraction, 0.75);
  EXPECT_EQ(usage[1].requests, 2u);
  EXPECT_EQ(usage[1].prefill_tokens, 5000u);
  EXPECT_EQ(usage[1].preemptions, 2u);

  std::ostringstream text;
  print_engine_usage(text, usage);
  EXPECT_NE(text.str().find("prefill0"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("0.0%"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("75.0%"), std::string::npos) << text.str();
  const nlohmann::json j = engine_usage_to_json(usage);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["requests"], 2);
  EXPECT_DOUBLE_EQ(j[1]["busy_fraction"].get<double>(), 0.75);

  run.engines.resize(1);
  EXPECT_THROW(engine_usage(deployment, run), Error);
}

// The report says which model, GPU and parallelism ran, also when the file left them to the
// defaults (an operator's `[model] plugin = "sim"` without options ran Llama-3.1-8B at TP 1 and no
// report said so): every preset and every option set away from its default, per engine group when
// model_options differ; the JSON has every option.
TEST(EngineUsage, NamesTheModelAndTheOptionsEachEngineRan) {
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const DeploymentConfig d = parse_deployment(R"(
[model]
plugin = "sim"
options = { model = "llama-3.3-70b", tensor_parallel = 4 }
[[engines]]
role = "prefill"
model_options = { tensor_parallel = 8 }
[[engines]]
role = "decode"
[router]
plugin = "disaggregated"
[kv_transport]
plugin = "host_copy"
)",
                                              "deploy.toml", registry);
  SimulationResult run;
  run.engines.resize(2);
  const std::vector<EngineUsage> usage = engine_usage(d, run);
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].model, "sim");
  EXPECT_EQ(usage[0].model_options_summary,
            "gpu = \"h100\", model = \"llama-3.3-70b\", tensor_parallel = 8, dtype = \"bf16\", "
            "kv_dtype = \"auto\"");
  EXPECT_EQ(usage[1].model_options_summary,
            "gpu = \"h100\", model = \"llama-3.3-70b\", tensor_parallel = 4, dtype = \"bf16\", "
            "kv_dtype = \"auto\"");
  std::ostringstream text;
  print_engine_models(text, usage);
  EXPECT_EQ(text.str(), "model: sim (" + usage[0].model_options_summary +
                            "; other options at their defaults) on engine0; sim (" +
                            usage[1].model_options_summary +
                            "; other options at their defaults) on engine1\n");
  const nlohmann::json j = engine_usage_to_json(usage);
  EXPECT_EQ(j[0]["model"]["plugin"], "sim");
  EXPECT_EQ(j[0]["model"]["options"]["tensor_parallel"], 8);
  EXPECT_EQ(j[1]["model"]["options"]["tensor_parallel"], 4);
  EXPECT_EQ(j[1]["model"]["options"]["gpu"], "h100");
  EXPECT_DOUBLE_EQ(j[1]["model"]["options"]["gpu_memory_utilization"].get<double>(), 0.9);

  // No options at all: the presets it fell back to are named all the same, on one line.
  const DeploymentConfig plain =
      parse_deployment("[model]\nplugin = \"sim\"\n[[engines]]\ncount = 2\n", "d.toml", registry);
  SimulationResult plain_run;
  plain_run.engines.resize(2);
  std::ostringstream plain_text;
  print_engine_models(plain_text, engine_usage(plain, plain_run));
  EXPECT_EQ(plain_text.str(),
            "model: sim (gpu = \"h100\", model = \"llama-3.1-8b\", dtype = \"bf16\", kv_dtype = "
            "\"auto\"; other options at their defaults)\n");
}

}  // namespace
}  // namespace headway::core
