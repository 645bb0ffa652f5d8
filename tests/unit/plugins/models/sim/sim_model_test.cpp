// The sim model plugin's refusals at load, through the host as a deployment file reaches them: each
// names the option, the value and what would be taken instead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>

#include <string>

#include "../../../test_support/built_plugins.h"
#include "../../../test_support/error_of.h"

namespace headway::models::sim {
namespace {

using ::testing::HasSubstr;

// The message loading a sim model with these options throws.
std::string refusal(const std::string& options) {
  return test::error_of([&] {
           const core::DeploymentConfig config = core::parse_deployment(
               "[model]\nplugin = \"sim\"\noptions = { " + options + " }\n[[engines]]\n",
               "sim.toml", test::built_plugins());
           core::VirtualClock clock;
           core::HostServices host("engine0 model sim", &clock);
           core::ModelInstance model(config.model, ".", host);
         })
      .what();
}

// vLLM refuses a max_model_len past the model's derived maximum; the sim took one, and served a
// 500k-token prompt on a model of 131,072 positions (the operator's walkthrough).
TEST(SimModel, RefusesAMaxModelLenPastThePresetsPositions) {
  const std::string message = refusal(
      "gpu = \"h100\", model = \"llama-3.3-70b\", tensor_parallel = 8, max_model_len = 1000000");
  EXPECT_THAT(message, HasSubstr("max_model_len = 1000000 exceeds the llama-3.3-70b preset's "
                                 "131072 positions"));
  // The preset's own length, and a shorter one, still load.
  for (const char* length : {"131072", "4096"}) {
    const core::DeploymentConfig config = core::parse_deployment(
        std::string("[model]\nplugin = \"sim\"\noptions = { model = \"llama-3.3-70b\", "
                    "tensor_parallel = 8, max_model_len = ") +
            length + " }\n[[engines]]\n",
        "sim.toml", test::built_plugins());
    core::VirtualClock clock;
    core::HostServices host("engine0 model sim", &clock);
    const core::ModelInstance model(config.model, ".", host);
    EXPECT_EQ(model.info().max_model_len, std::stoul(length));
  }
}

// HBM given in MB by mistake (80000 for an 80 GB card) is refused by the option's range, naming
// it: it was taken, and the error that followed named kv_blocks (the operator's walkthrough).
TEST(SimModel, HbmInMegabytesIsRefusedNamingTheOption) {
  const std::string message = refusal("hbm_gb = 80000");
  EXPECT_THAT(message, HasSubstr("sim.toml: model.options.hbm_gb: expected number in [0, 2000]"));
  EXPECT_THAT(message, HasSubstr("got 80000"));
}

// A degree that does not split the heads names the rule and, since an operator then has to find
// one that does, the degrees that would, up to what the gpu allows (the operator's walkthrough).
TEST(SimModel, AnIllegalTensorParallelDegreeListsTheLegalOnes) {
  EXPECT_THAT(refusal("model = \"llama-3.3-70b\", tensor_parallel = 3"),
              HasSubstr("tensor_parallel = 3 cannot split the model: heads=64 % tp=3 = 1: query "
                        "heads do not split evenly; the degrees that split it (up to 8): 1, 2, 4, "
                        "8"));
  // Qwen 2.5-7B's 28 query heads split 7 ways, its 4 kv heads do not replicate so.
  EXPECT_THAT(refusal("model = \"qwen2.5-7b\", tensor_parallel = 7"),
              HasSubstr("tensor_parallel = 7 cannot split the model: tp=7 % kv_heads=4 = 3: kv "
                        "heads cannot be replicated evenly; the degrees that split it (up to 8): "
                        "1, 2, 4"));
  // A custom gpu may span nodes: up to the option's 64.
  EXPECT_THAT(refusal("model = \"qwen2.5-7b\", tensor_parallel = 7, gpu = \"custom\", "
                      "peak_tflops = 989, hbm_tb_per_s = 3.35, hbm_gb = 80, link_gb_per_s = 100"),
              HasSubstr("(up to 64): 1, 2, 4, 28"));
}

}  // namespace
}  // namespace headway::models::sim
