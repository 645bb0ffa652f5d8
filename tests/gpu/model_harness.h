// Drives a model plugin through the registry and its C ABI, as the engine does, for the GPU tests
// and benchmarks: hands out KV blocks (in a scrambled order), runs steps built from hand-written
// slices and returns logits rows or sampled ids. Threading: test-thread only.
#pragma once

#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>

#include <algorithm>
#include <filesystem>
#include <headway/sdk/model.hpp>
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
    // A model that samples itself: ask for the sampled row too (hw_model_batch.logits_wanted).
    bool row_wanted = false;
    bool all_logits = false;  // a row per position (hw_model_slice.all_logits)
  };
  struct Result {
    // The rows in the ABI's order (sdk::logits_rows): one per sampling slice of a model that
    // returns logits, or per slice that asked for it; one per position of an all_logits slice.
    std::vector<std::vector<float>> logits;
    std::vector<int32_t> sampled;  // per slice (models sampling themselves)
  };

  Result step(const std::vector<Slice>& slices) {
    const bool returns_logits = info().returns_logits != 0;
    const bool on_request = !returns_logits && info().returns_logits_on_request != 0;
    std::vector<hw_model_slice> ms;
    std::vector<uint8_t> wanted;
    uint32_t rows = 0;
    for (const Slice& s : slices) {
      Request& r = requests_[s.request];
      const uint32_t start = static_cast<uint32_t>(r.tokens.size());
      r.tokens.insert(r.tokens.end(), s.tokens.begin(), s.tokens.end());
      while (r.blocks.size() * block_size_ < r.tokens.size()) {
        if (next_block_ >= blocks_) throw std::runtime_error("harness: out of KV blocks");
        r.blocks.push_back((next_block_++ * 37u) % blocks_);
      }
      ms.push_back(hw_model_slice{s.request, start, static_cast<uint32_t>(s.tokens.size()), nullptr,
                                  r.blocks.data(), static_cast<uint32_t>(r.blocks.size()),
                                  s.sample ? 1 : 0, s.temperature, 1.0f, s.seed, r.outputs, 0, 0.0f,
                                  s.all_logits ? 1u : 0u});
      wanted.push_back(on_request && s.sample && s.row_wanted ? 1 : 0);
      if (returns_logits || on_request) {
        rows += sdk::logits_rows(ms.back(), returns_logits || wanted.back() != 0);
      }
      if (s.sample) ++r.outputs;
    }
    for (size_t i = 0; i < slices.size(); ++i) {
      ms[i].token_ids = requests_[slices[i].request].tokens.data() + ms[i].start;
    }
    const bool logits = rows > 0;
    const uint32_t vocab = info().vocab;
    std::vector<float> buffer(size_t{rows} * vocab);
    Result out;
    out.sampled.assign(slices.size(), -1);
    const bool any_wanted = std::find(wanted.begin(), wanted.end(), 1) != wanted.end();
    hw_model_batch batch{sizeof(hw_model_batch), ms.data(), static_cast<uint32_t>(ms.size()),
                         block_size_, any_wanted ? wanted.data() : nullptr};
    hw_model_output output{
        sizeof(hw_model_output), out.sampled.data(), 0.0, logits ? buffer.data() : nullptr, rows,
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
