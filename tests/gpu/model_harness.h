// Drives a model plugin through the registry and its C ABI, as the engine does, for the GPU tests
// and benchmarks: hands out KV blocks (in a scrambled order), runs steps built from hand-written
// slices and returns logits rows or sampled ids. Threading: test-thread only.
#pragma once

#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../unit/test_support/built_plugins.h"

namespace headway::gpu_test {

class ModelHarness {
 public:
  // options: the inside of the TOML inline table, e.g. `path = "/x", sampling = "host"`.
  ModelHarness(const std::string& plugin, const std::string& options,
               const std::filesystem::path& dir, uint32_t block_size = 16, uint32_t blocks = 1024)
      : host_("test", &clock_), block_size_(block_size), blocks_(blocks) {
    const std::string toml = "[model]\nplugin = \"" + plugin + "\"\noptions = { " + options +
                             " }\n[[engines]]\nscheduler = { plugin = \"chunked\" }\n";
    config_ = std::make_unique<core::DeploymentConfig>(
        core::parse_deployment(toml, dir / "deploy.toml", test::built_plugins()));
    model_ = std::make_unique<core::ModelInstance>(config_->model, dir.string(), host_);
    model_->init_kv(blocks, block_size);
  }

  const hw_model_info& info() const { return model_->info(); }

  struct Slice {
    uint64_t request;
    std::vector<int32_t> tokens;
    bool sample = true;
    float temperature = 0.0f;
    uint64_t seed = 0;
  };
  struct Result {
    std::vector<std::vector<float>> logits;  // per sampling slice (models returning logits)
    std::vector<int32_t> sampled;            // per slice (models sampling themselves)
  };

  Result step(const std::vector<Slice>& slices) {
    std::vector<hw_model_slice> ms;
    uint32_t rows = 0;
    for (const Slice& s : slices) {
      Request& r = requests_[s.request];
      const uint32_t start = static_cast<uint32_t>(r.tokens.size());
      r.tokens.insert(r.tokens.end(), s.tokens.begin(), s.tokens.end());
      while (r.blocks.size() * block_size_ < r.tokens.size()) {
        if (next_block_ >= blocks_) throw std::runtime_error("harness: out of KV blocks");
        r.blocks.push_back((next_block_++ * 37u) % blocks_);
      }
      rows += s.sample ? 1 : 0;
      ms.push_back(hw_model_slice{s.request, start, static_cast<uint32_t>(s.tokens.size()), nullptr,
                                  r.blocks.data(), static_cast<uint32_t>(r.blocks.size()),
                                  s.sample ? 1 : 0, s.temperature, 1.0f, s.seed, r.outputs, 0, 0.0f,
                                  0});
      if (s.sample) ++r.outputs;
    }
    for (size_t i = 0; i < slices.size(); ++i) {
      ms[i].token_ids = requests_[slices[i].request].tokens.data() + ms[i].start;
    }
    const bool logits = info().returns_logits != 0;
    const uint32_t vocab = info().vocab;
    std::vector<float> buffer(logits ? size_t{rows} * vocab : 0);
    Result out;
    out.sampled.assign(slices.size(), -1);
    hw_model_batch batch{sizeof(hw_model_batch), ms.data(), static_cast<uint32_t>(ms.size()),
                         block_size_};
    hw_model_output output{
        sizeof(hw_model_output), out.sampled.data(), 0.0, logits ? buffer.data() : nullptr, 0,
        logits ? vocab : 0};
    model_->forward(batch, output);
    if (logits) {
      for (uint32_t i = 0; i < rows; ++i) {
        out.logits.emplace_back(buffer.begin() + size_t{i} * vocab,
                                buffer.begin() + size_t{i + 1} * vocab);
      }
    }
    return out;
  }

  // Unloads the model (it reports some counters then) and returns the counters it added.
  std::map<std::string, double> unload() {
    model_.reset();
    return host_.counters();
  }

  // Prefills in chunks (summing to the prompt) and returns the last position's logits.
  std::vector<float> prefill(uint64_t request, const std::vector<int32_t>& prompt,
                             const std::vector<uint32_t>& chunks) {
    size_t at = 0;
    std::vector<float> last;
    for (uint32_t c : chunks) {
      std::vector<int32_t> part(prompt.begin() + at, prompt.begin() + at + c);
      at += c;
      Result r = step({{request, part, at == prompt.size()}});
      if (at == prompt.size()) last = r.logits.at(0);
    }
    return last;
  }

 private:
  struct Request {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> blocks;
    uint32_t outputs = 0;
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

}  // namespace headway::gpu_test
