#include "cuda_model_config.h"

#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <string>

namespace headway::models::cuda {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw sdk::Error(HW_INVALID_ARGUMENT, "cuda model: " + message);
}

LlamaConfig llama31(uint32_t hidden, uint32_t ffn, uint32_t layers, uint32_t heads) {
  LlamaConfig c;
  c.hidden_size = hidden;
  c.intermediate_size = ffn;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = 8;
  c.head_dim = hidden / heads;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling.llama3 = true;
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.low_freq_factor = 1.0;
  c.rope_scaling.high_freq_factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 8192.0;
  c.bos_token_id = 128000;
  c.eos_token_id = 128001;
  c.torch_dtype = "bfloat16";
  return c;
}

// Qwen's released shapes: head_dim 128, no rope scaling, rms_norm_eps 1e-6, rope_theta 1e6; the
// Instruct models' end token. Qwen 2 adds biases on q, k and v, Qwen 3 a norm of each q and k head
// (random weights: zero biases, norms of ones).
LlamaConfig qwen(const char* model_type, uint32_t hidden, uint32_t ffn, uint32_t layers,
                 uint32_t heads, uint32_t kv_heads, uint32_t vocab, uint32_t max_positions) {
  LlamaConfig c;
  c.model_type = model_type;
  c.hidden_size = hidden;
  c.intermediate_size = ffn;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = 128;
  c.vocab_size = vocab;
  c.max_position_embeddings = max_positions;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.bos_token_id = 151643;
  c.eos_token_id = 151645;
  c.torch_dtype = "bfloat16";
  c.qkv_bias = c.model_type == "qwen2";
  c.qk_norm = c.model_type == "qwen3";
  return c;
}

}  // namespace

const std::vector<std::string>& named_shapes() {
  static const std::vector<std::string> names = {"llama-3.1-8b", "llama-3.3-70b", "qwen2.5-7b",
                                                 "qwen3-8b"};
  return names;
}

LlamaConfig named_shape(std::string_view name) {
  if (name == "llama-3.1-8b") return llama31(4096, 14336, 32, 32);
  if (name == "llama-3.3-70b") return llama31(8192, 28672, 80, 64);
  if (name == "qwen2.5-7b") return qwen("qwen2", 3584, 18944, 28, 28, 4, 152064, 32768);
  if (name == "qwen3-8b") return qwen("qwen3", 4096, 12288, 36, 32, 8, 151936, 40960);
  std::string known;
  for (const std::string& n : named_shapes()) known += (known.empty() ? "" : ", ") + n;
  invalid("unknown shape '" + std::string(name) + "' (known: config, " + known + ")");
}

CudaModelOptions parse_options(const sdk::Options& o, const std::string& config_dir) {
  CudaModelOptions r;
  const std::string path = o.get_string("path");
  if (!path.empty()) {
    std::filesystem::path p(path);
    if (p.is_relative() && !config_dir.empty()) p = std::filesystem::path(config_dir) / p;
    r.path = p.lexically_normal();
  }
  r.shape = o.get_string("shape");
  r.random_weights = o.get_bool("random_weights");
  r.seed = static_cast<uint64_t>(o.get_int("seed"));
  r.device = static_cast<int>(o.get_int("device"));
  r.tensor_parallel = static_cast<uint32_t>(o.get_int("tensor_parallel"));
  r.max_model_len = static_cast<uint32_t>(o.get_int("max_model_len"));
  r.kv_cache_gb = o.get_double("kv_cache_gb");
  r.gpu_memory_fraction = o.get_double("gpu_memory_fraction");
  r.sample_on_device = o.get_string("sampling") == "device";
  r.max_batch_tokens = static_cast<uint32_t>(o.get_int("max_batch_tokens"));
  r.deterministic = o.get_bool("deterministic");
  r.decode_gemv = o.get_bool("decode_gemv");
  r.decode_gemv_max_rows = static_cast<uint32_t>(o.get_int("decode_gemv_max_rows"));
  r.fuse_swiglu = o.get_bool("fuse_swiglu");
  r.phase_timing = o.get_bool("phase_timing");
  const std::string tiling = o.get_string("attention_tiling");
  for (const kernels::MmaTiling t : kernels::kMmaTilings) {
    if (tiling == kernels::mma_tiling_name(t)) r.attention_tiling = t;
  }
  r.split_prefill_attention = o.get_bool("split_prefill_attention");
  r.programmatic_dependent_launch = o.get_bool("programmatic_dependent_launch");
  // NCCL picks the all-reduce's algorithm (ring, tree, NVLS) and how it cuts the buffer by the
  // step's size: the order and place of the ranks' additions, so the rounding, follow the batch.
  if (r.deterministic && r.tensor_parallel > 1) {
    invalid("deterministic = true needs tensor_parallel = 1 (NCCL's all-reduce over " +
            std::to_string(r.tensor_parallel) +
            " GPUs adds the ranks' outputs in an order and on a path that depend on the step's "
            "size, so results would depend on the batch); set one of them otherwise");
  }
  // -1 (auto) takes graphs where they work; a number set by the operator is checked.
  const int64_t graphs = o.get_int("cuda_graph_max_batch");
  if (graphs < 0) {
    r.cuda_graph_max_batch = r.tensor_parallel == 1 && !r.phase_timing ? kAutoCudaGraphMaxBatch : 0;
  } else {
    r.cuda_graph_max_batch = static_cast<uint32_t>(graphs);
    if (r.cuda_graph_max_batch > 0 && r.tensor_parallel > 1) {
      invalid("cuda_graph_max_batch = " + std::to_string(r.cuda_graph_max_batch) +
              " needs tensor_parallel = 1 (graphs around NCCL all-reduces are not supported "
              "yet); set cuda_graph_max_batch = 0");
    }
    if (r.cuda_graph_max_batch > 0 && r.phase_timing) {
      invalid("cuda_graph_max_batch = " + std::to_string(r.cuda_graph_max_batch) +
              " and phase_timing = true exclude each other (phase timing records events between "
              "launches, a graph replays them as one); set one of them off");
    }
  }
  if (r.shape == "config") {
    if (r.path.empty()) {
      invalid(
          "option 'path' (a checkpoint directory) is required unless 'shape' names one of "
          "the built-in shapes");
    }
  } else {
    named_shape(r.shape);  // throws on an unknown name
    if (!r.random_weights) {
      invalid("shape '" + r.shape +
              "' has no checkpoint: set random_weights = true, or shape = \"config\" with 'path'");
    }
  }
  return r;
}

LlamaConfig resolve_architecture(const CudaModelOptions& options) {
  if (options.shape == "config") return cpu::load_llama_config(options.path);
  return named_shape(options.shape);
}

void check_kernel_limits(const LlamaConfig& c) {
  if (c.head_dim == 0 || c.head_dim > 256 || c.head_dim % 2 != 0) {
    invalid("head_dim " + std::to_string(c.head_dim) +
            " is not supported (the attention kernels take even head_dim up to 256)");
  }
  if (c.num_key_value_heads == 0 || c.num_attention_heads % c.num_key_value_heads != 0 ||
      c.num_attention_heads / c.num_key_value_heads > 32) {
    invalid("num_attention_heads " + std::to_string(c.num_attention_heads) +
            " / num_key_value_heads " + std::to_string(c.num_key_value_heads) +
            " is not supported (a GQA group of at most 32 heads)");
  }
}

TensorParallelLayout plan_tensor_parallel(const LlamaConfig& c, uint32_t tp) {
  const std::string what = "tensor_parallel = " + std::to_string(tp) + ": ";
  if (tp == 0) invalid(what + "must be at least 1");
  const uint32_t heads = c.num_attention_heads;
  const uint32_t kv = c.num_key_value_heads;
  if (heads % tp != 0) {
    invalid(what + "num_attention_heads " + std::to_string(heads) +
            " is not a multiple of it (heads % tp must be 0)");
  }
  if (tp <= kv && kv % tp != 0) {
    invalid(what + "num_key_value_heads " + std::to_string(kv) +
            " is not a multiple of it (kv_heads % tp must be 0 when tp <= kv_heads)");
  }
  if (tp > kv && tp % kv != 0) {
    invalid(what + "it is not a multiple of num_key_value_heads " + std::to_string(kv) +
            " (tp % kv_heads must be 0 when tp > kv_heads, so that each kv head is replicated on "
            "the same number of GPUs)");
  }
  if (c.intermediate_size % tp != 0) {
    invalid(what + "intermediate_size " + std::to_string(c.intermediate_size) +
            " is not a multiple of it");
  }
  TensorParallelLayout l;
  l.tp = tp;
  l.heads_per_rank = heads / tp;
  l.kv_replication = tp > kv ? tp / kv : 1;
  l.kv_heads_per_rank = tp > kv ? 1 : kv / tp;
  l.ffn_per_rank = c.intermediate_size / tp;
  return l;
}

}  // namespace headway::models::cuda
