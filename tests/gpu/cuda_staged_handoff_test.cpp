// Disaggregation across processes with KV on the GPU (needs one CUDA device; skips otherwise):
// two engine processes' services of the cuda model in this test process, each with
// [kv_transport] host_copy (built with CUDA), hand a request over through a shared-memory stage:
// the prefill side copies its KV blocks GPU -> stage, the decode side stage -> GPU. The greedy
// tokens must equal those of one cuda engine that serves the request alone, and no stage may be
// left in /dev/shm. The same over a host_copy peer link (kv_handoff = "link": the prefill side
// holds its KV on the GPU, the decode side pulls it through the link's pinned shared rings).
// Without a transport, the hand-off fails naming the missing [kv_transport].
#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/serving/local_generation_service.h>
#include <tiny_checkpoint.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../unit/serving/service/loopback_peers.h"
#include "../unit/serving/service/service_fixture.h"
#include "../unit/test_support/built_plugins.h"
#include "../unit/test_support/staged_kv_objects.h"
#include "gpu_test_support.h"
#include "tiny_bf16_spec.h"

namespace headway::serving {
namespace {

namespace fs = std::filesystem;

class CudaStagedHandoff : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("headway_cuda_handoff_" + std::to_string(::getpid())));
    models::cpu::write_tiny_checkpoint(gpu_test::tiny_bf16_spec(), *dir_ / "tiny");
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  // One cuda engine; `extra`: tables after it. Deterministic arithmetic: a row's result does not
  // depend on the step it is in, so the split run must give the very tokens of the single one.
  static core::DeploymentConfig deployment(const std::string& extra) {
    const std::string text =
        "name = \"cuda-handoff\"\n[model]\nplugin = \"cuda\"\noptions = { path = \"tiny\", "
        "kv_cache_gb = 0.25, deterministic = true }\n[[engines]]\nscheduler = { plugin = "
        "\"chunked\", options = { max_num_batched_tokens = 64 } }\n" +
        extra;
    return core::parse_deployment(text, *dir_ / "deploy.toml", headway::test::built_plugins());
  }
  // The greedy tokens of handoff_prompts() served by one cuda engine alone.
  static std::vector<std::vector<int32_t>> tokens_of_one_engine();
  static fs::path* dir_;
};
fs::path* CudaStagedHandoff::dir_ = nullptr;

const std::string kEngineProcess = "[server]\nrole = \"engine\"\n";
const std::string kTransport = "[kv_transport]\nplugin = \"host_copy\"\n";

using test::collect;
using test::text_request;

size_t stages_left() { return headway::test::staged_kv_objects_of(::getpid()); }

const std::vector<std::string>& handoff_prompts();

std::vector<std::vector<int32_t>> CudaStagedHandoff::tokens_of_one_engine() {
  std::vector<std::vector<int32_t>> tokens;
  LocalGenerationService alone(deployment(""));
  for (const std::string& prompt : handoff_prompts()) {
    tokens.push_back(collect(*alone.submit(text_request(prompt, 12))).ids);
  }
  return tokens;
}

const std::vector<std::string>& handoff_prompts() {
  static const std::vector<std::string> prompts = {"Hi", std::string(150, 'q'),
                                                   std::string(700, 'z') + " tail"};
  return prompts;
}

// Prefills each prompt on `prefill`, continues it on `decode` from the KV handed over (a stage,
// or held KV pulled from "prefill" when `held`), and checks the tokens against `expected`.
void expect_handed_over_tokens(LocalGenerationService& prefill, LocalGenerationService& decode,
                               bool held, const std::vector<std::vector<int32_t>>& expected) {
  for (size_t i = 0; i < handoff_prompts().size(); ++i) {
    SCOPED_TRACE(i);
    GenerateInput first_half = text_request(handoff_prompts()[i], 12);
    first_half.prefill_only = true;
    const test::Collected first = collect(*prefill.submit(first_half));
    ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
    ASSERT_TRUE(first.kv_stage.has_value());
    EXPECT_EQ(first.kv_stage->held, held);
    GenerateInput second_half = text_request(handoff_prompts()[i], 12);
    second_half.kv_source = first.kv_stage;
    if (held) second_half.kv_source->source_address = "prefill";
    second_half.generated_ids = first.ids;
    const test::Collected rest = collect(*decode.submit(second_half));
    EXPECT_EQ(rest.finish, Finish::kLength) << rest.error;
    EXPECT_GT(rest.timings.kv_transfer_seconds, 0.0);  // moved, not prefilled again
    std::vector<int32_t> got = first.ids;
    got.insert(got.end(), rest.ids.begin(), rest.ids.end());
    EXPECT_EQ(got, expected[i]);
  }
}

TEST_F(CudaStagedHandoff, GpuKvThroughAStageGivesTheTokensOfOneEngine) {
  HW_SKIP_WITHOUT_CUDA();
  const std::vector<std::vector<int32_t>> expected = tokens_of_one_engine();
  LocalGenerationService prefill(deployment(kEngineProcess + kTransport));
  LocalGenerationService decode(deployment(kEngineProcess + kTransport));
  expect_handed_over_tokens(prefill, decode, /*held=*/false, expected);
  EXPECT_EQ(stages_left(), 0u);
}

TEST_F(CudaStagedHandoff, GpuKvOverASharedMemoryLinkGivesTheTokensOfOneEngine) {
  HW_SKIP_WITHOUT_CUDA();
  const std::vector<std::vector<int32_t>> expected = tokens_of_one_engine();
  auto peers = std::make_shared<test::LoopbackPeers>();
  LocalGenerationService prefill(
      deployment("[server]\nrole = \"engine\"\nkv_handoff = \"link\"\n" + kTransport));
  LocalGenerationService decode(deployment(kEngineProcess + kTransport), test::with_peers(peers));
  peers->add("prefill", &prefill);
  expect_handed_over_tokens(prefill, decode, /*held=*/true, expected);
  EXPECT_EQ(peers->sends(), 3);
  EXPECT_EQ(headway::test::shm_objects_of(::getpid(), "headway-kvlink-"), 0u);
}

TEST_F(CudaStagedHandoff, WithoutATransportTheHandOffFailsNamingIt) {
  HW_SKIP_WITHOUT_CUDA();
  LocalGenerationService prefill(deployment(kEngineProcess));
  GenerateInput input = text_request("Hello there", 4);
  input.prefill_only = true;
  const test::Collected got = collect(*prefill.submit(input));
  EXPECT_EQ(got.finish, Finish::kError);
  EXPECT_NE(got.error.find("[kv_transport]"), std::string::npos) << got.error;
  EXPECT_EQ(stages_left(), 0u);
}

}  // namespace
}  // namespace headway::serving
