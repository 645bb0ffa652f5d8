// Faulty on purpose: a tiny logits model that keeps each request's tokens in a cache of its own,
// keyed by request id, and never reads the block table (as a backend with one sequence per request
// would). Chunked and batched prefills are right, since every chunk comes under its request's id;
// a request that starts past a prefix another request's tokens wrote (prefix caching) finds no
// history. The suite must report model.shared_prefix as FAIL.
#include <cmath>
#include <headway/plugin.hpp>
#include <unordered_map>
#include <vector>

#include "tiny_logits_model.h"

namespace {

using headway::conformance::faulty::kTinyVocab;

class PerRequestCacheModel final : public headway::sdk::Model {
 public:
  PerRequestCacheModel(const headway::sdk::Host&, const headway::sdk::Options&,
                       const std::string&) {}
  hw_model_info info() const override {
    return headway::conformance::faulty::tiny_logits_model_info();
  }
  void init_kv(uint32_t, uint32_t) override {}
  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      // The bug: the history lives under the request's id, not in its blocks.
      std::vector<int32_t>& history = histories_[s.request_id];
      history.resize(s.start);  // a new request past a shared prefix starts from nothing here
      history.insert(history.end(), s.token_ids, s.token_ids + s.tokens);
      if (!s.sample) continue;
      float sum = 0.0f;  // every earlier token counts, as attention over the KV would
      for (size_t t = 0; t < history.size(); ++t)
        sum += 0.01f * static_cast<float>(history[t] % 97);
      for (uint32_t v = 0; v < kTinyVocab; ++v) {
        out.logits[row * kTinyVocab + v] = std::sin(sum + 0.7f * static_cast<float>(v));
      }
      ++row;
    }
    out.seconds = 1e-3;
  }

 private:
  std::unordered_map<uint64_t, std::vector<int32_t>> histories_;
};

}  // namespace

HEADWAY_EXPORT_MODEL(PerRequestCacheModel, "org.headway.faulty.per_request_cache_model",
                     "faulty_per_request_cache", "0.0.1",
                     "Faulty on purpose: keeps KV per request id, not in its blocks",
                     headway::sdk::no_options)
