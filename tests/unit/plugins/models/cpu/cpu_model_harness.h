// Test harness for the cpu model plugin: creates it through the plugin registry and its C ABI
// (exactly as the engine does), hands out KV blocks, and runs steps built from hand-written slices.
#pragma once

#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_registry.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../../../test_support/built_plugins.h"
#include "tiny_checkpoint.h"

namespace headway::models::cpu::testing {

inline core::PluginRegistry& registry() { return test::built_plugins(); }

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("headway_cpu_" + tag + "_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Small enough that every test runs in milliseconds, big enough to have several layers, GQA,
// several KV blocks per request and llama3 rope scaling.
inline TinyModelSpec small_spec(DType dtype = DType::kF32) {
  TinyModelSpec s;
  s.layers = 2;
  s.hidden = 64;
  s.heads = 4;
  s.kv_heads = 2;
  s.ffn = 96;
  s.vocab = 300;
  s.seed = 7;
  s.dtype = dtype;
  s.max_position_embeddings = 1024;
  return s;
}

// A model instance with its own KV pool; requests get blocks on first use.
class ModelHarness {
 public:
  ModelHarness(const std::filesystem::path& checkpoint, const std::string& extra_options = "",
               uint32_t block_size = 4, uint32_t blocks = 512)
      : clock_(), host_("test", &clock_), block_size_(block_size), blocks_(blocks) {
    const std::string toml = "[model]\nplugin = \"cpu\"\noptions = { path = \"" +
                             checkpoint.string() + "\"" + extra_options +
                             " }\n[[engines]]\nscheduler = { plugin = \"chunked\" }\n";
    config_ = std::make_unique<core::DeploymentConfig>(
        core::parse_deployment(toml, checkpoint / "deploy.toml", registry()));
    model_ = std::make_unique<core::ModelInstance>(config_->model, checkpoint.string(), host_);
    model_->init_kv(blocks, block_size);
  }

  const hw_model_info& info() const { return model_->info(); }
  core::ModelInstance& model() { return *model_; }

  struct Slice {
    uint64_t request;
    std::vector<int32_t> tokens;  // the slice's tokens, appended to the request's history
    bool sample = true;
    bool all_logits = false;  // a row for each of its positions (hw_model_slice.all_logits)
  };

  // Runs one step; returns, in slice order, a logits row per position of an all_logits slice and
  // one per other sampling slice.
  std::vector<std::vector<float>> step(const std::vector<Slice>& slices) {
    std::vector<hw_model_slice> model_slices;
    uint32_t rows = 0;
    for (const Slice& s : slices) {
      Request& r = requests_[s.request];
      const uint32_t start = static_cast<uint32_t>(r.tokens.size());
      r.tokens.insert(r.tokens.end(), s.tokens.begin(), s.tokens.end());
      while (r.blocks.size() * block_size_ < r.tokens.size()) {
        if (next_block_ >= blocks_) throw std::runtime_error("test harness: out of KV blocks");
        // Hand out blocks in a scrambled order so that no test passes by accident of
        // contiguous memory.
        r.blocks.push_back((next_block_++ * 37u) % blocks_);
      }
      rows += s.all_logits ? static_cast<uint32_t>(s.tokens.size()) : s.sample ? 1 : 0;
      model_slices.push_back(
          hw_model_slice{s.request, start, static_cast<uint32_t>(s.tokens.size()), nullptr,
                         r.blocks.data(), static_cast<uint32_t>(r.blocks.size()), s.sample ? 1 : 0,
                         0.0f, 1.0f, 0, 0, 0, 0.0f, s.all_logits ? 1u : 0u});
    }
    // token_ids point into the histories, which no longer reallocate during this step.
    for (size_t i = 0; i < slices.size(); ++i) {
      model_slices[i].token_ids =
          requests_[slices[i].request].tokens.data() + model_slices[i].start;
    }
    const uint32_t vocab = info().vocab;
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    std::vector<int32_t> sampled(slices.size());
    hw_model_batch batch{sizeof(hw_model_batch), model_slices.data(),
                         static_cast<uint32_t>(model_slices.size()), block_size_};
    // The host sets logits_rows to the rows its buffer holds (abi.h), which the host checks.
    hw_model_output output{sizeof(hw_model_output), sampled.data(), 0.0,
                           logits.data(),           rows,           vocab};
    model_->forward(batch, output);
    if (output.logits_rows != rows) throw std::runtime_error("test harness: logits_rows");
    std::vector<std::vector<float>> out(rows);
    for (uint32_t i = 0; i < rows; ++i) {
      out[i].assign(logits.begin() + static_cast<ptrdiff_t>(i) * vocab,
                    logits.begin() + static_cast<ptrdiff_t>(i + 1) * vocab);
    }
    return out;
  }

  // Prefills `prompt` for `request` in chunks of the given sizes (summing to its length) and
  // returns the logits of the last position.
  std::vector<float> prefill(uint64_t request, const std::vector<int32_t>& prompt,
                             const std::vector<uint32_t>& chunks) {
    size_t at = 0;
    std::vector<float> last;
    for (uint32_t c : chunks) {
      std::vector<int32_t> part(prompt.begin() + static_cast<ptrdiff_t>(at),
                                prompt.begin() + static_cast<ptrdiff_t>(at + c));
      at += c;
      auto rows = step({{request, part, at == prompt.size()}});
      if (at == prompt.size()) last = rows.at(0);
    }
    return last;
  }

  const std::vector<int32_t>& history(uint64_t request) { return requests_[request].tokens; }

 private:
  struct Request {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> blocks;
  };
  core::VirtualClock clock_;
  core::HostServices host_;
  uint32_t block_size_;
  uint32_t blocks_;
  uint32_t next_block_ = 0;
  std::unique_ptr<core::DeploymentConfig> config_;
  std::unique_ptr<core::ModelInstance> model_;
  std::map<uint64_t, Request> requests_;
};

inline std::vector<int32_t> random_tokens(uint32_t count, uint32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(count);
  for (auto& v : t) v = static_cast<int32_t>(rng() % vocab);
  return t;
}

inline int32_t argmax(const std::vector<float>& row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

// max |a - b| / max |b|: the relative error of a whole logits row.
inline double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0.0;
  double scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / std::max(scale, 1e-30);
}

inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  return relative_error(a, std::vector<double>(b.begin(), b.end()));
}

}  // namespace headway::models::cpu::testing
