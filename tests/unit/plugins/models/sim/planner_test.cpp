// The capacity planner: which tensor-parallel degrees are legal, and memory per GPU for the Llama
// presets on H100 and H200 at several contexts against figures computed by hand from the shapes
// (the arithmetic is in the comments; none is copied from the planner's output).
#include "planner.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "cost_model.h"
#include "presets.h"

namespace headway::models::sim {
namespace {

// The runtime reserve the planner adds (planner.cpp): CUDA context 1e9, cuBLAS + cuBLASLt
// workspaces 2 x 32 MiB = 67,108,864, CUDA graphs 0.5e9; NCCL buffers 0.5e9 when tp > 1.
constexpr double kReserveTp1 = 1e9 + 67'108'864 + 0.5e9;  // 1,567,108,864
constexpr double kReserveTpN = kReserveTp1 + 0.5e9;       // 2,067,108,864
// Logits of 256 sampled rows over Llama 3's 128,256-entry vocabulary, fp32 logits + fp32
// probabilities: 256 * 128,256 * 8 = 262,668,288 bytes.
constexpr double kLogits = 262'668'288;

ModelShape preset(const char* name) { return find_model_preset(name)->shape; }

PlanInput input(const char* model, const char* gpu, uint32_t context, uint32_t concurrency = 1) {
  PlanInput in;
  in.model = preset(model);
  in.hbm_bytes = to_gpu_spec(*find_gpu_preset(gpu)).hbm_bytes;
  in.context = context;
  in.concurrency = concurrency;
  return in;
}

TEST(Planner, HeadDivisibilityRules) {
  ModelShape m = preset("llama-3.1-8b");  // 32 heads, 8 kv heads
  for (uint32_t tp : {1u, 2u, 4u, 8u, 16u, 32u})
    EXPECT_EQ(tensor_parallel_problem(m, tp), "") << tp;
  EXPECT_NE(tensor_parallel_problem(m, 3).find("heads=32 % tp=3 = 2"), std::string::npos);
  EXPECT_NE(tensor_parallel_problem(m, 64).find("heads=32 % tp=64"), std::string::npos);

  m.heads = 28;  // Qwen2.5-7B: 28 query heads, 4 kv heads
  m.kv_heads = 4;
  EXPECT_EQ(tensor_parallel_problem(m, 4), "");
  EXPECT_EQ(tensor_parallel_problem(m, 8), "heads=28 % tp=8 = 4: query heads do not split evenly");

  m.heads = 24;  // 3 kv heads: tp 2 splits neither evenly, tp 4 and 8 cannot replicate them
  m.kv_heads = 3;
  EXPECT_EQ(tensor_parallel_problem(m, 2), "kv_heads=3 % tp=2 = 1: kv heads do not split evenly");
  EXPECT_EQ(tensor_parallel_problem(m, 4),
            "tp=4 % kv_heads=3 = 1: kv heads cannot be replicated evenly");
  EXPECT_EQ(tensor_parallel_problem(m, 3), "");
  EXPECT_EQ(tensor_parallel_problem(m, 6), "");  // replicate each kv head on two GPUs

  m.heads = 32;  // 2 kv heads replicated over 4 or 8 GPUs: legal
  m.kv_heads = 2;
  EXPECT_EQ(tensor_parallel_problem(m, 8), "");
  EXPECT_EQ(kv_heads_per_gpu(m, 8), 1u);
}

TEST(Planner, IllegalDegreesAreSkippedWithTheirReason) {
  PlanInput in = input("llama-3.1-8b", "h100", 4096);
  in.model.heads = 28;
  in.model.kv_heads = 4;
  in.model.hidden = 3584;
  in.model.layers = 280;  // ~70 GB of bf16 layers: too big for one 80 GB GPU, fits on two
  const Plan plan = plan_tensor_parallel(in);
  ASSERT_EQ(plan.degrees.size(), 4u);
  EXPECT_FALSE(plan.degrees[0].fits);
  EXPECT_TRUE(plan.degrees[0].legal());
  EXPECT_EQ(plan.chosen, 1);
  EXPECT_FALSE(plan.degrees[3].legal());
  EXPECT_EQ(plan.degrees[3].head_problem, "heads=28 % tp=8 = 4: query heads do not split evenly");
  EXPECT_FALSE(plan.degrees[3].fits);
}

TEST(Planner, Llama8bOnH100At8kFitsOnOneGpu) {
  const PlanInput in = input("llama-3.1-8b", "h100", 8192);
  const Plan plan = plan_tensor_parallel(in);
  ASSERT_EQ(plan.chosen, 0);
  const DegreeVerdict& v = plan.degrees[0];
  // Per layer: q,o 2*4096*4096 = 33,554,432; k,v 2*4096*1024 = 8,388,608; MLP 3*4096*14336 =
  // 176,160,768; sum 218,103,808; 32 layers 6,979,321,856. Embedding = LM head = 4096*128256 =
  // 525,336,576. 8,029,995,008 parameters * 2 bytes:
  EXPECT_DOUBLE_EQ(v.memory.weights, 16'059'990'016.0);
  // 32 layers * 2 * 8 kv heads * 128 * 2 bytes = 131,072 bytes/token; * 8192 tokens:
  EXPECT_EQ(v.kv_bytes_per_token, 131'072u);
  EXPECT_DOUBLE_EQ(v.memory.kv_cache, 1'073'741'824.0);
  // Per row: 3*4096 + q 4096 + k,v 2048 + attention out 4096 + MLP 3*14336 = 65,536 bf16 values =
  // 131,072 bytes; * 8192 rows = 1,073,741,824; plus the logits.
  EXPECT_DOUBLE_EQ(v.memory.activations, 1'073'741'824.0 + kLogits);
  EXPECT_DOUBLE_EQ(v.memory.runtime_reserve(), kReserveTp1);
  EXPECT_EQ(v.memory.nccl_buffers, 0.0);
  EXPECT_DOUBLE_EQ(v.memory.total(), 20'037'250'816.0);
  // The process may use 0.9 of the 80 GB, as vLLM's default gpu_memory_utilization:
  // (72e9 - 16,059,990,016 - 1,336,410,112 - 1,567,108,864) / 1,073,741,824 = 49.4
  EXPECT_EQ(v.max_concurrency, 49u);
}

TEST(Planner, Llama70bBf16NeedsFourH100sAt64kButTwoH200s) {
  const Plan h100 = plan_tensor_parallel(input("llama-3.3-70b", "h100", 65536));
  ASSERT_EQ(h100.chosen, 2);
  // TP1: 70,552,387,584 parameters * 2 bytes = 141 GB of weights alone.
  EXPECT_DOUBLE_EQ(h100.degrees[0].memory.weights, 141'104'775'168.0);
  EXPECT_FALSE(h100.degrees[0].fits);

  // TP2: layers 80 * ((134,217,728 + 704,643,072) / 2 + 2*8192*4*128) = 34,225,520,640 params,
  // * 2 bytes + (embedding + LM head) / 2 * 2 bytes = 2,101,346,304: 70,552,387,584.
  const DegreeVerdict& tp2 = h100.degrees[1];
  EXPECT_DOUBLE_EQ(tp2.memory.weights, 70'552'387'584.0);
  // 80 * 2 * 4 kv heads * 128 * 2 = 163,840 bytes/token * 65,536 = 10,737,418,240.
  EXPECT_DOUBLE_EQ(tp2.memory.kv_cache, 10'737'418'240.0);
  // Per row 3*8192 + 4096 + 1024 + 4096 + 3*28672/2 = 76,800 values, * 2 bytes * 8192 rows.
  EXPECT_DOUBLE_EQ(tp2.memory.activations, 1'258'291'200.0 + kLogits);
  EXPECT_DOUBLE_EQ(tp2.memory.runtime_reserve(), kReserveTpN);
  EXPECT_DOUBLE_EQ(tp2.memory.total(), 84'877'874'176.0);  // over 80 GB, let alone 72
  EXPECT_FALSE(tp2.fits);

  // TP4: layers 80 * (838,860,800 / 4 + 2*8192*2*128) = 17,112,760,320 params * 2 bytes
  // + 2,101,346,304 / 4 * 2 = 35,276,193,792; KV 81,920 bytes/token * 65,536 = 5,368,709,120;
  // activations (24,576 + 2048 + 512 + 2048 + 21,504) * 2 * 8192 = 830,472,192 + logits.
  const DegreeVerdict& tp4 = h100.degrees[2];
  EXPECT_TRUE(tp4.fits);
  EXPECT_DOUBLE_EQ(tp4.memory.weights, 35'276'193'792.0);
  EXPECT_DOUBLE_EQ(tp4.memory.kv_cache, 5'368'709'120.0);
  EXPECT_DOUBLE_EQ(tp4.memory.activations, 830'472'192.0 + kLogits);
  EXPECT_DOUBLE_EQ(tp4.memory.total(), 43'805'152'256.0);
  // (72e9 - 35,276,193,792 - 1,093,140,480 - 2,067,108,864) / 5,368,709,120 = 6.3
  EXPECT_EQ(tp4.max_concurrency, 6u);

  // Same degrees on 141 GB H200s (126.9 GB usable): TP2's 84.9 GB fits.
  const Plan h200 = plan_tensor_parallel(input("llama-3.3-70b", "h200", 65536));
  ASSERT_EQ(h200.chosen, 1);
  EXPECT_DOUBLE_EQ(h200.degrees[1].memory.total(), 84'877'874'176.0);
  // (126.9e9 - 70,552,387,584 - 1,520,959,488 - 2,067,108,864) / 10,737,418,240 = 4.9
  EXPECT_EQ(h200.degrees[1].max_concurrency, 4u);
}

// Two H100s hold 70B's bf16 weights (70.55 GB each) but not within the 72 GB a process may use
// once activations and the runtime are counted: vLLM refuses that at its default
// gpu_memory_utilization too, and people raise it to 0.95 or take four GPUs.
TEST(Planner, Llama70bBf16NeedsFourH100sUnlessTheProcessMayUseMore) {
  // TP2 at 4k: 70,552,387,584 + 163,840 * 4,096 = 671,088,640 of KV + 1,520,959,488 of
  // activations + 2,067,108,864 of reserve = 74,811,544,576 > 72e9.
  PlanInput in = input("llama-3.3-70b", "h100", 4096);
  Plan plan = plan_tensor_parallel(in);
  ASSERT_EQ(plan.chosen, 2);
  EXPECT_DOUBLE_EQ(plan.degrees[1].memory.total(), 74'811'544'576.0);
  EXPECT_FALSE(plan.degrees[1].fits);
  // At 0.95 (76 GB) it fits, with room for one more such request:
  // (76e9 - 70,552,387,584 - 1,520,959,488 - 2,067,108,864) / 671,088,640 = 2.8.
  in.gpu_memory_utilization = 0.95;
  plan = plan_tensor_parallel(in);
  ASSERT_EQ(plan.chosen, 1);
  EXPECT_EQ(plan.degrees[1].max_concurrency, 2u);
}

// NVIDIA NIM runs Llama-3.3-70B FP8 on two H100s: one holds the fp8 weights (72.65 GB) but nothing
// more.
TEST(Planner, Fp8WeightsAndKvPut70bOnTwoH100s) {
  PlanInput in = input("llama-3.3-70b", "h100", 8192);
  in.weight_bytes = 1;
  in.kv_bytes = 1;
  const Plan plan = plan_tensor_parallel(in);
  ASSERT_EQ(plan.chosen, 1);
  // TP1: layers 68,451,041,280 params * 1 byte + embedding and LM head 2,101,346,304 * 2 bytes
  // (bf16): more than the 72 GB usable before anything else.
  EXPECT_DOUBLE_EQ(plan.degrees[0].memory.weights, 72'653'733'888.0);
  EXPECT_FALSE(plan.degrees[0].fits);
  const DegreeVerdict& v = plan.degrees[1];
  // TP2: 68,451,041,280 / 2 bytes of layers + 2,101,346,304 / 2 * 2 bytes = 36,326,866,944.
  EXPECT_DOUBLE_EQ(v.memory.weights, 36'326'866'944.0);
  // 80 * 2 * 4 kv heads * 128 * 1 byte = 81,920 bytes/token * 8192.
  EXPECT_DOUBLE_EQ(v.memory.kv_cache, 671'088'640.0);
  // Per row 3*8192 + 4096 + 1024 + 4096 + 3*28672/2 = 76,800 values * 2 bytes * 8192 rows.
  EXPECT_DOUBLE_EQ(v.memory.activations, 1'258'291'200.0 + kLogits);
  EXPECT_DOUBLE_EQ(v.memory.total(), 40'586'023'936.0);
  // (72e9 - 36,326,866,944 - 1,520,959,488 - 2,067,108,864) / 671,088,640 = 47.8
  EXPECT_EQ(v.max_concurrency, 47u);
}

// The planner and the sim model size memory the same way (the same share of HBM, the same weights
// and KV bytes): a deployment at the degree `plan` chooses loads in `headway simulate` with room
// for a request of the planned context. (Not the converse: the sim keeps a flat
// activation_reserve_gb of 2 GB where the planner estimates activations and runtime at 3 to 4, so
// the sim may load a degree the planner calls too tight, e.g. Llama-2-70B bf16 on two H100s.)
TEST(Planner, ADegreeThatFitsAlsoLoadsInTheSimModel) {
  for (const char* gpu : {"h100", "h200"}) {
    for (const ModelPreset& model : model_presets()) {
      for (const uint32_t bytes : {1u, 2u}) {
        for (const uint32_t context : {4096u, 32768u}) {
          SCOPED_TRACE(std::string(gpu) + " " + std::string(model.name) + " bytes " +
                       std::to_string(bytes) + " context " + std::to_string(context));
          PlanInput in = input(std::string(model.name).c_str(), gpu, context);
          in.weight_bytes = bytes;
          in.kv_bytes = bytes;
          const Plan plan = plan_tensor_parallel(in);
          if (plan.chosen < 0) continue;
          const uint32_t tp = plan.degrees[static_cast<size_t>(plan.chosen)].tensor_parallel;
          CostConfig config = preset_config(gpu, model.name, tp);
          config.weight_bytes = bytes;
          config.kv_bytes = bytes;
          config.model.max_model_len = context;
          EXPECT_NO_THROW(CostModel{config}) << "tp " << tp;
        }
      }
    }
  }
}

TEST(Planner, BlocksRoundTheContextUp) {
  // 8,193 tokens take 513 blocks of 16 = 8,208 tokens of KV.
  const DegreeVerdict v = plan_tensor_parallel(input("llama-3.1-8b", "h100", 8193)).degrees[0];
  EXPECT_EQ(v.tokens_per_request, 8208u);
  EXPECT_DOUBLE_EQ(v.memory.kv_cache, 8208.0 * 131'072);
}

TEST(Planner, NothingFitsIsReportedNotThrown) {
  // 70B bf16 at 128k context x 64 requests: 64 * 131,072 * 40,960 (TP8) = 344 GB of KV per GPU.
  const Plan plan = plan_tensor_parallel(input("llama-3.3-70b", "h100", 131072, 64));
  EXPECT_EQ(plan.chosen, -1);
  for (const DegreeVerdict& v : plan.degrees) EXPECT_FALSE(v.fits) << v.tensor_parallel;
}

TEST(Planner, AgreesWithTheCostModelOnWeightsAndKv) {
  // One source of truth: the planner's weights and KV bytes are the sim model's.
  for (uint32_t tp : {2u, 4u, 8u}) {
    CostConfig config = preset_config("h200", "llama-3.3-70b", tp);
    config.weight_bytes = 1;
    PlanInput in = input("llama-3.3-70b", "h200", 4096);
    in.weight_bytes = 1;
    const CostModel model(config);
    const MemoryBreakdown memory = memory_per_gpu(in, tp);
    EXPECT_DOUBLE_EQ(memory.weights, model.weight_bytes_per_gpu()) << tp;
    EXPECT_DOUBLE_EQ(memory.kv_cache, 4096.0 * model.kv_bytes_per_token_per_gpu()) << tp;
  }
}

TEST(Planner, RejectsZeroInputs) {
  PlanInput in = input("llama-3.1-8b", "h100", 8192);
  in.context = 0;
  EXPECT_THROW(plan_tensor_parallel(in), std::invalid_argument);
  in = input("llama-3.1-8b", "h100", 8192, 0);
  EXPECT_THROW(plan_tensor_parallel(in), std::invalid_argument);
  in = input("llama-3.1-8b", "h100", 8192);
  in.model.vocab = 0;
  try {
    plan_tensor_parallel(in);
    FAIL() << "vocab 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vocab"), std::string::npos) << e.what();
  }
  in = input("llama-3.1-8b", "h100", 8192);
  in.weight_bytes = 4;
  EXPECT_THROW(plan_tensor_parallel(in), std::invalid_argument);
}

}  // namespace
}  // namespace headway::models::sim
